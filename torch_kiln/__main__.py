# SPDX-License-Identifier: Apache-2.0
"""`python -m torch_kiln`: versions, devices, ISA, threads, environment, registrations."""
from torch_kiln.diagnostics import report

print(report())
