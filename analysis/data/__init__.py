"""The data room: what a sweep left on disk read into tables (collect) through bounded reads (files), the
metric registry (metrics), the claims a spec states (claims), sweep.json's adaptive record (adaptive_record),
the paper's Table 3 (paper), a search's samples and Optuna study (samples, study_file) and text made safe to
print (text).  Imports nothing of analysis/ outside this room."""
