"""The report room: one document model (document) that both reports are drawn through; a Table 3 report built once
(model), laid out as blocks (blocks) and written (writers, html_report, markdown, plots, tables, evalsets); a
search's report (search_report, search_plots, search_interactive); the reach of a rule (reach) and which verdicts
the rule changes (rule_changes).  Built on analysis.data and analysis.stats."""
