"""docs/transformerlens.md's table of analyses: each function's call signature and return, as
``inspect.signature`` reads them from the code (rendered here; ``INTERP_WRITE_DOCS=1`` rewrites
the table, otherwise the test fails when the page differs from the code)."""

from __future__ import annotations

import inspect
import os
import pathlib
import re

import interp
from interp.inspect.mechanism import labels, measure
from interp.inspect.tools import circuits, hooks, interventions, notebook, probes, viz

GUIDE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "transformerlens.md"
#: (how the guide imports it, the function, what it is for)
ANALYSES = [
    ("hooks.attention_patterns", hooks.attention_patterns, "every layer's pattern"),
    ("hooks.attention_report", hooks.attention_report, "attention on the construction's positions"),
    ("probes.probe_resid", probes.probe_resid, "cos/sin probe of one hook point"),
    ("probes.probe_model", probes.probe_model, "cos/sin probes of every embedding table"),
    ("circuits.qk_matrix", circuits.qk_matrix, "QK over keys and targets"),
    ("circuits.ov_matrix", circuits.ov_matrix, "OV over values and classes"),
    ("interventions.ablate", interventions.ablate, "one head ablated at chosen positions"),
    ("interventions.patch_positions", interventions.patch_positions, "activation patching at positions"),
    ("interventions.path_patch", interventions.path_patch, "path patching, layer to layer"),
    ("interventions.attribution_patching", interventions.attribution_patching, "attribution patching"),
    ("interventions.logit_lens", interventions.logit_lens, "the logit lens"),
    ("interventions.slot_logit_attribution", interventions.slot_logit_attribution, "logit attribution by position"),
    ("measure.measure", measure.measure, "every measure of one model"),
    ("labels.routing", labels.routing, "the routing label of a measure row"),
    ("labels.code", labels.code, "the code label of a measure row"),
    ("notebook.attention", notebook.attention, "circuitsvis views in a notebook"),
    ("viz.save_attention_html", viz.save_attention_html, "circuitsvis views as a page, offline"),
    ("interp.load", interp.load, "a checkpoint's model"),
    ("interp.load_run", interp.load_run, "a checkpoint's model, config and metrics"),
]
#: returns the code does not annotate
RETURNS = {"interp.load": "TaskTransformer (a HookedTransformer)"}


def _call(name: str, fn) -> str:
    parts, star = [], False
    for p in inspect.signature(fn).parameters.values():
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        if p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
        elif p.default is p.empty:
            parts.append(p.name)
        else:
            default = p.default.__name__ if callable(p.default) else repr(p.default)
            parts.append(f"{p.name}={default}")
    return f"{name}({', '.join(parts)})"


def _returns(name: str, fn) -> str:
    annotation = inspect.signature(fn).return_annotation
    if annotation is inspect.Signature.empty:
        return RETURNS[name]
    return (annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))).strip('"')


def render() -> str:
    rows = [f"| `{_call(name, fn)}` | `{_returns(name, fn)}` | {what} |" for name, fn, what in ANALYSES]
    return "| call | returns | for |\n|---|---|---|\n" + "\n".join(rows) + "\n"


def test_every_analysis_has_a_return_the_table_can_say():
    for name, fn, _ in ANALYSES:
        assert _returns(name, fn), name


def test_the_guide_shows_each_analysis_call_and_return():
    page = GUIDE.read_text()
    block = re.compile(r"(<!-- analyses: .*? -->\n)(.*?)(<!-- /analyses -->)", re.S)
    assert block.search(page), "docs/transformerlens.md has no <!-- analyses: ... --> block"
    if os.environ.get("INTERP_WRITE_DOCS") == "1":
        GUIDE.write_text(block.sub(lambda m: m.group(1) + render() + m.group(3), page))
    assert block.search(GUIDE.read_text()).group(2) == render(), \
        "the table differs from the code: INTERP_WRITE_DOCS=1 pytest tests/core/test_tl_guide.py"
