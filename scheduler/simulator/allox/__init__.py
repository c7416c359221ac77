"""Interchangeable jobs in the simulator: AlloX, AlloX+ and the paper's baselines (EuroSys'20
§5) on the ``allox`` workload. See ../README.md, "Workload ``allox``"."""

from scheduler.simulator.allox import policies as policies  # registers the policies
