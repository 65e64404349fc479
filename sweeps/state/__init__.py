"""The state room: what a sweep keeps on disk and reads back: sweep.json (sweep_state), trials' and rounds' records
(records), where it lives (storage), the driver's lock (lock), a search's state rebuilt from data (search_state),
the live view's reading of the directory (live) and a full disk said in one line (diskfull).  Built on
sweeps.spec."""
