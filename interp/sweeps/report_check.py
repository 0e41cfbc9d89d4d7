"""The report's test of the paper's numbers, cell by cell (issue 53): :mod:`interp.sweeps.paper_check`
run on every cell of a sweep's table that has the paper's max and mean and our seeds, rendered
as Markdown for ``report.md``; and :func:`md_text`, which every piece of user text (a title, a
``paper.csv`` label, a config value) goes through before it enters the report.

A cell is *non-informative* when every config of it is (``paper_check.informative_config``):
decided from the settings alone, never from an outcome. Those cells are listed apart and left
out of the Holm family; the headline counts the informative ones.
"""

from __future__ import annotations

from interp.sweeps import paper_check as pc


def md_text(value) -> str:
    """``value`` as text safe inside a Markdown table cell or heading: HTML's special characters
    as entities (no tag or script survives), ``|`` escaped, line breaks as spaces."""
    text = str(value)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")
    return " ".join(text.splitlines())


def informative_cells(sweep, table) -> list[bool]:
    """Per row of ``table``: False when every config of the cell is non-informative."""
    layout = sweep.layout
    out = []
    for _, r in table.iterrows():
        members = [c for c in sweep.configs
                   if all(getattr(c, f) == r[f] for f in layout.rows) and getattr(c, layout.column) == r[layout.column]]
        out.append(not members or any(pc.informative_config(c) for c in members))
    return out


def checks(sweep, table, *, seeds: int = 5, alpha: float = 0.05) -> list[pc.CellCheck | None]:
    """Per row of ``table`` (``report_table.cells``): its check, Holm-adjusted over the informative
    cells, or None where the cell lacks the paper's numbers or our seeds."""
    if table.empty:
        return []
    flags = informative_cells(sweep, table)
    out = []
    for flag, (_, r) in zip(flags, table.iterrows()):
        if not r["accuracies"] or r.get("paper_max") is None or r["paper_max"] != r["paper_max"]:
            out.append(None)
            continue
        out.append(pc.check_cell(r["accuracies"], r["paper_max"], r["paper_avg"], r["chance"],
                                 informative=flag, seeds=seeds))
    return pc.corrected(out, alpha=alpha)


def _ci(k: int, n: int, ci) -> str:
    return f"{k} of {n} ({100 * ci[0]:.0f}-{100 * ci[1]:.0f}%)"


def _p(p) -> str:
    return "—" if p is None else ("< 0.0001" if p < 1e-4 else f"{p:.4f}")


def verdict(r, c: pc.CellCheck) -> str:
    """Outside or consistent; when outside, the paper against our medians of 5-seed max and mean."""
    if c.p_holm is None:
        return "non-informative"
    if not c.outside:
        return "consistent"
    dm, da = r["paper_max"] - c.predictive.median_max, r["paper_avg"] - c.predictive.median_avg
    def word(d: float, what: str) -> str:
        return f"{what} at ours" if abs(d) < 0.05 else f"{what} {'above' if d > 0 else 'below'} ours by {abs(d):.1f}"
    return (f"**outside**: paper {word(dm, 'max')}, {word(da, 'mean')}"
            + ("; success rate differs" if c.rate_differs else ""))


def _row(r, c: pc.CellCheck, label: str) -> str:
    lo, hi = c.paper_range
    paper_s = f"{lo}" if lo == hi else f"{lo}-{hi}"
    return (f"| {label} | {c.n_seeds} | {_ci(c.successes, c.n_seeds, c.success_ci)} | "
            f"{_ci(c.at_chance, c.n_seeds, c.chance_ci)} | {r['paper_max']:.2f} / {r['paper_avg']:.2f} | "
            f"{paper_s} | {_p(c.predictive.p)} | {_p(c.p_holm)} | {_p(c.fisher)} | {_p(c.fisher_holm)} | "
            f"{verdict(r, c)} |")


HEAD = ("| cell | N | ours at >= 99% (95% CI) | ours at chance (95% CI) | paper max / mean | "
        "paper's seeds at >= 99% | p | p, Holm | Fisher p | Fisher, Holm | verdict |")


def check_lines(sweep, table, labels: list[str]) -> list[str]:
    """The section: how to read it, the headline over the informative cells, their table, then the
    non-informative cells apart. ``labels``: each row's cell label, already escaped."""
    found = checks(sweep, table)
    rows = [(r, c, lab) for (_, r), c, lab in zip(table.iterrows(), found, labels) if c is not None]
    if not rows:
        return []
    inf = [(r, c, lab) for r, c, lab in rows if c.informative]
    out_cells = [lab for r, c, lab in inf if c.outside]
    rate = [lab for r, c, lab in inf if c.rate_differs]
    few = sorted({c.n_seeds for _, c, _ in inf})
    lines = ["## The paper's numbers tested, cell by cell", "",
             "Null: the paper's 5 seeds are draws from our seeds (N per cell, each weight 1/N). "
             "`p`: the probability that 5 such draws give a max and a mean at least as far from ours "
             "as the paper's (the less typical of the two, each by its two-sided tail; values within "
             f"{pc.TOLERANCE:g} point count as ties), computed exactly. It takes our N seeds as the "
             "distribution: with few seeds it is too ready to reject. `Fisher p`: our successes "
             "(>= 99%) against the paper's possible ones (from its max and mean), exact, the "
             "uncertainty of both sides counted. Both Holm-adjusted over the informative cells; "
             "a cell is outside our distribution at adjusted p < 0.05. At chance: below chance "
             "+ (100 − chance)/10. Intervals: Clopper-Pearson 95%.", "",
             f"**Informative cells tested: {len(inf)}; the paper outside our distribution: "
             f"{len(out_cells)}" + (f" ({'; '.join(out_cells)})" if out_cells else "")
             + f"; of all tested, success rate differs: {len(rate)}. Seeds per cell: "
             + ", ".join(map(str, few)) + ".**", "", HEAD, "|---" * 11 + "|"]
    lines += [_row(r, c, lab) for r, c, lab in inf]
    apart = [(r, c, lab) for r, c, lab in rows if not c.informative]
    if apart:
        lines += ["", f"Non-informative by construction ({len(apart)} cells: cases 1 and 4 without "
                  "positional embeddings, at chance for any model; outside the Holm family):", "",
                  HEAD, "|---" * 11 + "|"]
        lines += [_row(r, c, lab) for r, c, lab in apart]
    return lines + [""]
