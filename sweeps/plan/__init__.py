"""The plan room: what a planned sweep will cost before anything runs: time estimates (estimate), a device's
measured rate (device_bench, machine_bench) and the budget's claim-by-claim order (budget_order, budget_plan).
Built on sweeps.spec."""
