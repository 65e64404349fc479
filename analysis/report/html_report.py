"""The HTML page of the Table 3 report (analysis.report.document.html_page: one file, styles and images inline).  It
draws the report's blocks (analysis.report.blocks, the same report.md draws) and computes nothing of its own."""

from __future__ import annotations

from .blocks import report_blocks
from .document import Block, html_page
from .model import ReportModel


def render(model: ReportModel) -> str:
    """report.html of the model: the report's blocks (analysis.report.blocks), figures inline."""
    return page(model, *report_blocks(model))


def page(model: ReportModel, blocks: list[Block], figures: dict[str, bytes]) -> str:
    """report.html of blocks already laid out (write_report lays them out once for both files)."""
    return html_page(str(model.header["sweep"]), blocks, figures)
