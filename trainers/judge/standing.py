"""How far a judge's held-out agreement can be believed: the one rule every page, the API and
the admin read a measure through, and the one constant it rests on.

A held-out measure (a fit's pair accuracy with its kappa, an outcome AUC by call, a model
judge's measured accuracy) is shown only when it counts at least MIN_HELD_OUT_ITEMS items:
with fewer, a bootstrap over four picks gives "1.000 [1.000, 1.000]", which reads as a
perfect judge and means nothing. Below it, the figure, its interval and kappa are None and
`too_few` says "too few to measure (n = 4)".

A judge's standing, from the measures that count:

  above_chance   some measure's interval lies wholly above a half: its verdicts stand
  at_chance      every measure that counts has an interval reaching a half (or below)
  too_few        measured, but on too few held-out items to tell
  not_measured   nothing held out measured it

Pure Python (no Django): arena.models, the evaluation and the pages all read it.
Reports stored before this rule are read through it too, so an old fit's 1.000 on four picks
is shown as too few to measure, not as what it claimed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# The fewest held-out items (picks for a pair accuracy, calls for an outcome AUC) a measure
# needs before its figure, interval or kappa is shown, or counts towards a verdict; the fit
# reads it too (whether a won head scores the total), so it lives with the fit.
from trainers.judge.fit import MIN_HELD_OUT_ITEMS
from trainers.stats.intervals import at_chance

ABOVE_CHANCE = "above_chance"
AT_CHANCE = "at_chance"
TOO_FEW = "too_few"
NOT_MEASURED = "not_measured"

# kind -> (the figure's key, the key counting its items, its name, what it counts)
MEASURE_KINDS: dict[str, tuple[str, str, str, str]] = {
    "pairs": ("accuracy", "pairs", "pair accuracy", "held-out picks"),
    "outcomes": ("auc", "calls", "AUC", "held-out calls"),
}


def too_few_words(items: int) -> str:
    return f"too few to measure (n = {items})"


def too_few_or_none(items: Any) -> str | None:
    """ "too few to measure (n = 6)" for a held-out count under MIN_HELD_OUT_ITEMS, else None
    (also when the count is unknown: a record that never said how many it held out)."""
    if isinstance(items, bool) or not isinstance(items, int) or items >= MIN_HELD_OUT_ITEMS:
        return None
    return too_few_words(items)


def measure_items(measure: Mapping[str, Any] | None, kind: str) -> int:
    """How many held-out items the measure counts."""
    if not measure:
        return 0
    return int(measure.get(MEASURE_KINDS[kind][1]) or 0)


def measure_shown(measure: Mapping[str, Any] | None, kind: str) -> dict[str, Any] | None:
    """The measure as pages and the API show it: its own keys, with the figure, its interval,
    kappa and at_chance set to None under MIN_HELD_OUT_ITEMS, and `too_few` saying why (None
    when it counts). Idempotent: a shown measure shows the same."""
    if measure is None:
        return None
    value_key, _count_key, _name, _unit = MEASURE_KINDS[kind]
    shown = dict(measure)
    items = measure_items(measure, kind)
    if items < MIN_HELD_OUT_ITEMS:
        for key in (value_key, f"{value_key}_ci", "kappa", "at_chance"):
            if key in shown:
                shown[key] = None
        shown["too_few"] = too_few_words(items)
    else:
        shown["too_few"] = None
    return shown


def measure_text(measure: Mapping[str, Any] | None, kind: str, *, digits: int = 3) -> str:
    """ "0.712 [0.601, 0.803]", "too few to measure (n = 4)", or "—" when nothing was measured."""
    shown = measure_shown(measure, kind)
    if not shown:
        return "—"
    if shown["too_few"]:
        return shown["too_few"]
    value_key = MEASURE_KINDS[kind][0]
    value = shown.get(value_key)
    if value is None:
        return "—"
    text = f"{value:.{digits}f}"
    interval = shown.get(f"{value_key}_ci")
    if interval:
        text += f" [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"
    return text


def report_shown(report: Mapping[str, Any] | None) -> dict[str, Any]:
    """A fit's report (trainers.judge.fit.measure) with every measure passed through
    measure_shown: the pairs and outcomes of both columns, and each dimension's rows."""
    shown = dict(report or {})
    for kind in MEASURE_KINDS:
        if isinstance(shown.get(kind), Mapping):
            shown[kind] = {
                who: measure_shown(value, kind) if who in ("fitted", "rubric") else value
                for who, value in shown[kind].items()
            }
    if isinstance(shown.get("dimensions"), Mapping):
        shown["dimensions"] = {
            name: {
                who: measure_shown(value, "pairs") if who in ("fitted", "rubric") else value
                for who, value in row.items()
            }
            for name, row in shown["dimensions"].items()
        }
    return shown


def _counts(measure: Mapping[str, Any], kind: str) -> bool:
    value_key = MEASURE_KINDS[kind][0]
    return (
        measure_items(measure, kind) >= MIN_HELD_OUT_ITEMS
        and measure.get(value_key) is not None
        and bool(measure.get(f"{value_key}_ci"))
    )


def _above_chance(measure: Mapping[str, Any], kind: str) -> bool:
    """A measure that counts and whose interval lies wholly above a half."""
    return _counts(measure, kind) and not at_chance(measure[f"{MEASURE_KINDS[kind][0]}_ci"])


def measures_above_chance(measures: Iterable[tuple[str, Mapping[str, Any] | None]]) -> list[str]:
    """The measures that let a judge's verdicts stand (those standing() finds above chance),
    each in words with what it counts: "AUC 0.68 [0.58, 0.77] on 116 held-out calls". A
    verdict names them, so a reader sees which figure licensed it."""
    return [
        f"{MEASURE_KINDS[kind][2]} {measure_text(measure, kind, digits=2)} on "
        f"{measure_items(measure, kind)} {MEASURE_KINDS[kind][3]}"
        for kind, measure in measures
        if measure and _above_chance(measure, kind)
    ]


def standing(measures: Iterable[tuple[str, Mapping[str, Any] | None]]) -> dict[str, Any]:
    """A judge's standing from its (kind, measure) pairs: "state" (above_chance, at_chance,
    too_few, not_measured), "figures" (the measures that count, as "AUC 0.50 [0.42, 0.59]",
    joined) and "items" (each measure's count in words: "4 held-out picks")."""
    given = [
        (kind, measure) for kind, measure in measures if measure and measure_items(measure, kind)
    ]
    counted = [(kind, measure) for kind, measure in given if _counts(measure, kind)]
    figures = "; ".join(
        f"{MEASURE_KINDS[kind][2]} {measure_text(measure, kind, digits=2)}"
        for kind, measure in counted
    )
    items = " and ".join(
        f"{measure_items(measure, kind)} {MEASURE_KINDS[kind][3]}" for kind, measure in given
    )
    if any(_above_chance(measure, kind) for kind, measure in counted):
        state = ABOVE_CHANCE
    elif counted:
        state = AT_CHANCE
    elif given:
        state = TOO_FEW
    else:
        state = NOT_MEASURED
    return {"state": state, "figures": figures, "items": items}


def report_standing(report: Mapping[str, Any] | None, who: str = "fitted") -> dict[str, Any]:
    """The standing of one column ("fitted" or "rubric") of a fit's report."""
    report = report or {}
    return standing((kind, (report.get(kind) or {}).get(who)) for kind in ("pairs", "outcomes"))


def standing_words(judge_standing: Mapping[str, Any]) -> str:
    """Why a judge gives no verdict, in the words every page uses ("" when it gives one)."""
    state = judge_standing.get("state")
    if state == AT_CHANCE:
        return f"this world's judge is at chance ({judge_standing.get('figures')})"
    if state == TOO_FEW:
        return (
            f"this world's judge is measured on too few held-out items to tell "
            f"({judge_standing.get('items')}; it needs {MIN_HELD_OUT_ITEMS})"
        )
    if state == NOT_MEASURED:
        return "this world's judge is not measured on held-out data yet"
    return ""


def pairs_text(measure: Mapping[str, Any] | None, *, with_kappa: bool) -> str:
    """A pair accuracy in words with its interval (and kappa), and its ties."""
    shown = measure_shown(measure, "pairs")
    text = measure_text(shown, "pairs")
    if shown and not shown["too_few"] and with_kappa and shown.get("kappa") is not None:
        text += f" · κ {shown['kappa']:.3f}"
    if shown and shown.get("ties") is not None:
        text += f" · {shown['ties']} ties of {shown.get('pairs') or 0}"
    return text


def report_rows(report: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """A fit's held-out report as the Environment → Judge panel shows it, one row per
    measure: {"key", "label", "fitted", "rubric"} in words. Every figure goes through
    measure_shown (too few items: "too few to measure (n = 4)"), and each dimension's row
    says which held-out picks it counts: only those where reviewers ticked that reason."""
    report = report or {}
    rows: list[dict[str, Any]] = []
    pairs = report.get("pairs") or {}
    if pairs:
        rows.append(
            {
                "key": "pair-accuracy",
                "label": "Agrees with reviewers' picks",
                "fitted": pairs_text(pairs.get("fitted"), with_kappa=True),
                "rubric": pairs_text(pairs.get("rubric"), with_kappa=True),
            }
        )
    rows += _parts_rows(pairs, "pairs", "pair-accuracy", report)
    total = measure_items(pairs.get("fitted"), "pairs")
    for name, row in (report.get("dimensions") or {}).items():
        counted = measure_items(row.get("fitted"), "pairs")
        note = "" if row.get("own_head", True) else " (rubric's score: too few picks to learn it)"
        rows.append(
            {
                "key": f"dimension-{name}",
                "label": f"where reviewers ticked {name}: {counted} of the {total} held-out "
                f"picks{note}",
                "fitted": measure_text(row.get("fitted"), "pairs"),
                "rubric": measure_text(row.get("rubric"), "pairs"),
            }
        )
    outcomes = report.get("outcomes") or {}
    if outcomes:
        fitted = measure_shown(outcomes.get("fitted"), "outcomes")
        fitted_text = measure_text(fitted, "outcomes")
        if fitted and not fitted["too_few"]:
            fitted_text += f" on {measure_items(fitted, 'outcomes')} calls"
        rows.append(
            {
                "key": "outcome-auc",
                "label": "Tells won calls from lost ones (AUC by call)",
                "fitted": fitted_text,
                "rubric": measure_text(outcomes.get("rubric"), "outcomes"),
            }
        )
        rows += _parts_rows(outcomes, "outcomes", "outcome-auc", report)
    return rows


def _parts_rows(
    block: Mapping[str, Any], kind: str, key: str, report: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Where the judge reads replies with a base: the same held-out figure for its words alone
    and for the base alone, so a person sees what each part brings."""
    base = (report.get("scorer") or {}).get("base")
    parts = (("words", "its words alone"), ("base", f"the base alone ({base})"))
    return [
        {
            "key": f"{key}-{part}",
            "label": f"  … {label}",
            "fitted": pairs_text(block[part], with_kappa=False)
            if kind == "pairs"
            else measure_text(block[part], kind),
            "rubric": "",
        }
        for part, label in parts
        if block.get(part)
    ]


def scorer_text(report: Mapping[str, Any] | None) -> str:
    """What a fitted version reads replies with, in words: the base and which parts it kept for
    the total and for won (chosen by cross-validation on its training part, by
    trainers.judge.scorer_choice's rule), or the words."""
    scorer = (report or {}).get("scorer") or {}
    base = scorer.get("base")
    if not base:
        missing = scorer.get("base_missing")
        if missing:
            return (
                f"Reads the words of each reply: the base it was to read with is missing. {missing}"
            )
        return "Reads the words of each reply (fitted without a base)."
    kept = {name: scorer.get(name) or "words" for name in ("total", "won")}
    total = {
        "won": "scores a reply's total by its won-probability (no picks yet)",
        "rubric": "scores a reply's total by the rubric (no picks yet, and its won head did not "
        "beat chance on held-out calls)",
    }.get(kept["total"], f"kept {kept['total']} for the total")
    return (
        f"Reads each reply with {base}; {total} and kept {kept['won']} for won, "
        "preferring the base alone, then words + base, to what beat them only within the "
        "spread of the folds of cross-validation on its training part. "
        f"{_answers_text(scorer.get('answers'))}"
    )


def _answers_text(answers: Mapping[str, Any] | None) -> str:
    """What the guard's answer check (trainers.judge.answers) does for this version."""
    if answers is None:
        return "It was fitted before the guard checked that a reply answers its call."
    if answers.get("floor") is None:
        return (
            f"It does not check that a reply answers its call: {answers.get('sample') or 0} of "
            "the world's own agent turns after something said were read, too few to place a "
            "floor."
        )
    if answers.get("joint"):
        return (
            "A reply after something said whose words and whose answer to the call (how much "
            "likelier the base finds it after the call so far than after a bare opening) are "
            "together rarer than the world's own rarest 2% (Fisher's test, ranked against "
            f"{answers['sample']} of its own agent turns after something said) is capped as "
            "off-topic; so is one whose words alone are. A call's opening line answers nothing: "
            "its words alone judge it, against the world's own openings."
        )
    return (
        "A reply the base finds less likely after the call so far than after a bare opening, "
        f"below the world's own floor ({answers['floor']:.2f}, the 2nd percentile of "
        f"{answers['sample']} of its own agent turns after something said), is capped as "
        "off-topic."
    )
