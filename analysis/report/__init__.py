"""The report room: a Table 3 report built once (model) and written (writers, html_report, markdown, plots,
tables, evalsets), a search's report (search_report, search_plots, search_interactive, document), the reach of a
rule (reach), which verdicts the rule changes (rule_changes) and simulated tables for calibration (simulate).
Built on analysis.data and analysis.stats."""
