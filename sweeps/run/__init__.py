"""The run room: a sweep run on Ray Tune (runner, tune_adapter), one trial (trial), adaptive seeds (adaptive),
a search's replicates, confirmation and warm start, MLflow tracking, signals, the driver's log and `tsweep evaluate`
over a sweep (evaluate).  Built on sweeps.spec, sweeps.plan and sweeps.state."""
