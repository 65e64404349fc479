"""The spec room: a sweep spec read, validated and expanded into trials (sweep_spec), the limits a spec may ask
of the machine (bounds) and the scale profiles that map the paper's units onto a budget (profiles).  Imports
nothing of sweeps/ but this room."""
