"""The STRING paper's 3D-detection comparison ([STRING] §4.2.2 Table 4, App. F.4 Table 6) next to our numbers.

Pure bookkeeping, no torch: per-run test scores -> cells (best / mean ± std over seeds per encoder x encoding) ->
the paper's claims checked on those numbers -> Markdown. ``benchmarks/paper_table4.py`` trains and evaluates the
runs and calls :func:`summarise` and :func:`render_markdown`.

Numbers are average best 3D IoU over all ground-truth boxes (``metrics.summarize``'s ``avg_best_iou``), in % as the
paper prints them. Encoders: ``vit`` (RGB, 2D grid coordinates), ``vitd`` (RGB-D, ``grid_depth`` coordinates, the
paper's setting) and ``vitd_xyz`` (RGB-D, ``camera_xyz`` coordinates; ours, not in the paper).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

ENCODINGS = ('none', 'rope', 'rope_mixed', 'circulant', 'cayley')           # the paper's column order
EXTRA_ENCODINGS = ('tensor_product',)                                        # the paper's extensions (§3.3)
COLUMNS = ENCODINGS + EXTRA_ENCODINGS                                        # table columns; claims use ENCODINGS
ENCODING_TITLES = {'none': 'Baseline', 'rope': 'RoPE', 'rope_mixed': 'RoPE-M', 'circulant': 'Circulant-S',
                   'cayley': 'Cayley-S', 'tensor_product': '⊗-S'}
ENCODER_TITLES = {'vit': 'ViT', 'vitd': 'ViTD', 'vitd_xyz': 'ViTD camera_xyz',
                  # the paper's family beyond Table 4 (issue 10): extra rows, no paper numbers
                  'vit_sincos': 'ViT sin-cos APE', 'vit_nmap': 'ViT normal map', 'vitd_nmap': 'ViTD + normal map',
                  'vitd_lie': 'ViTD Lie-group (azimuth/polar)'}
STRING_ENCODINGS = ('circulant', 'cayley')
ROPE_ENCODINGS = ('rope', 'rope_mixed')

# Table 6: every run (3 seeds per cell), average 3D IoU % on their 80 held-out frames. Table 4 is its max per cell.
PAPER_TABLE6: dict[str, dict[str, tuple[float, ...]]] = {
    'vit': {'none': (49.77, 49.10, 47.85), 'rope': (55.77, 52.11, 58.09), 'rope_mixed': (2.53, 57.17, 2.46),
            'circulant': (56.69, 58.95, 13.12), 'cayley': (58.85, 58.43, 57.47)},
    'vitd': {'none': (65.88, 66.49, 67.60), 'rope': (71.21, 69.50, 70.31), 'rope_mixed': (70.78, 69.94, 70.90),
             'circulant': (72.36, 69.86, 68.51), 'cayley': (70.36, 72.67, 71.91)},
}
STATISTICS = ('best', 'mean')    # best of seeds (what the paper's Table 4 reports) and the mean over seeds


@dataclass
class Cell:
    """One encoder x encoding: the per-seed scores (%) and their statistics."""
    values: list[float]

    @property
    def best(self) -> float:
        return max(self.values)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def std(self) -> float:
        """Sample standard deviation over seeds (0 for one seed)."""
        return statistics.stdev(self.values) if len(self.values) > 1 else 0.0

    def stat(self, name: str) -> float:
        return getattr(self, name)

    def to_dict(self) -> dict[str, Any]:
        return {'values': list(self.values), 'best': self.best, 'mean': self.mean, 'std': self.std,
                'n': len(self.values)}


Cells = Mapping[str, Mapping[str, Cell]]     # encoder -> encoding -> Cell


def cells_from_runs(runs: Iterable[Mapping[str, Any]], metric: str = 'avg_best_iou') -> dict[str, dict[str, Cell]]:
    """Runs ``{'encoder', 'encoding', 'seed', 'test': {metric: fraction in [0, 1]}}`` -> cells in %."""
    cells: dict[str, dict[str, Cell]] = {}
    for run in runs:
        value = 100.0 * float(run['test'][metric])
        cells.setdefault(run['encoder'], {}).setdefault(run['encoding'], Cell([])).values.append(value)
    return cells


def paper_cells() -> dict[str, dict[str, Cell]]:
    return {enc: {e: Cell(list(v)) for e, v in row.items()} for enc, row in PAPER_TABLE6.items()}


# ----------------------------------------------------------------------------------------------------------------
# Claims
# ----------------------------------------------------------------------------------------------------------------

@dataclass
class Comparison:
    """``lhs >= rhs`` (or ``>`` when ``strict``) on one statistic; ``margin = lhs - rhs`` in IoU points;
    ``noise``: the larger seed standard deviation of the two cells (0 with one seed)."""
    lhs: str
    rhs: str
    lhs_value: float
    rhs_value: float
    strict: bool
    noise: float = 0.0

    @property
    def margin(self) -> float:
        return self.lhs_value - self.rhs_value

    @property
    def within_noise(self) -> bool:
        """The margin is no larger than the seed-to-seed spread: the ordering may be luck."""
        return abs(self.margin) <= self.noise

    @property
    def ok(self) -> bool:
        return self.margin > 0 if self.strict else self.margin >= 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), 'margin': self.margin, 'ok': self.ok, 'within_noise': self.within_noise}


@dataclass
class Claim:
    key: str
    statement: str
    comparisons: dict[str, list[Comparison]] = field(default_factory=dict)   # statistic -> comparisons

    def verdict(self, stat: str) -> str:
        """'holds' (every comparison true), 'fails' (some false) or 'untested' (cells missing)."""
        comps = self.comparisons.get(stat, [])
        if not comps:
            return 'untested'
        return 'holds' if all(c.ok for c in comps) else 'fails'

    def to_dict(self) -> dict[str, Any]:
        return {'key': self.key, 'statement': self.statement,
                'verdict': {s: self.verdict(s) for s in STATISTICS},
                'comparisons': {s: [c.to_dict() for c in cs] for s, cs in self.comparisons.items()}}


def _label(encoder: str, encoding: str) -> str:
    return f'{ENCODER_TITLES.get(encoder, encoder)} {ENCODING_TITLES.get(encoding, encoding)}'


def _compare(cells: Cells, a: tuple[str, str], b: tuple[str, str], stat: str, strict: bool) -> Comparison | None:
    ca, cb = cells.get(a[0], {}).get(a[1]), cells.get(b[0], {}).get(b[1])
    if ca is None or cb is None:
        return None
    return Comparison(_label(*a), _label(*b), ca.stat(stat), cb.stat(stat), strict, max(ca.std, cb.std))


def _best_of(cells: Cells, encoder: str, encodings: Sequence[str], stat: str) -> str | None:
    present = [e for e in encodings if e in cells.get(encoder, {})]
    return max(present, key=lambda e: cells[encoder][e].stat(stat)) if present else None


def _claim_vitd_beats_vit(cells: Cells, stat: str) -> list[Comparison]:
    return [c for e in ENCODINGS if (c := _compare(cells, ('vitd', e), ('vit', e), stat, strict=True))]


def _claim_string_ge_rope(cells: Cells, stat: str) -> list[Comparison]:
    out = []
    for encoder in ('vit', 'vitd'):
        s, r = _best_of(cells, encoder, STRING_ENCODINGS, stat), _best_of(cells, encoder, ROPE_ENCODINGS, stat)
        if s and r:
            out.append(_compare(cells, (encoder, s), (encoder, r), stat, strict=False))
    return out


def _claim_encodings_beat_none(cells: Cells, stat: str) -> list[Comparison]:
    return [c for encoder in ('vit', 'vitd') for e in ENCODINGS[1:]
            if (c := _compare(cells, (encoder, e), (encoder, 'none'), stat, strict=True))]


def _claim_best(encoder: str, winner: str) -> Callable[[Cells, str], list[Comparison]]:
    def comparisons(cells: Cells, stat: str) -> list[Comparison]:
        return [c for e in ENCODINGS if e != winner
                if (c := _compare(cells, (encoder, winner), (encoder, e), stat, strict=False))]
    return comparisons


def _claim_grid_depth_ge_xyz(cells: Cells, stat: str) -> list[Comparison]:
    return [c for e in ENCODINGS if (c := _compare(cells, ('vitd', e), ('vitd_xyz', e), stat, strict=False))]


CLAIMS: tuple[tuple[str, str, Callable[[Cells, str], list[Comparison]]], ...] = (
    ('vitd_beats_vit', 'ViTD > ViT for every encoding', _claim_vitd_beats_vit),
    ('string_ge_rope', 'best STRING >= best RoPE (ViT and ViTD)', _claim_string_ge_rope),
    ('encodings_beat_none', 'every encoding > no encoding (ViT and ViTD)', _claim_encodings_beat_none),
    ('circulant_best_vit', 'Circulant-STRING is the best ViT encoding', _claim_best('vit', 'circulant')),
    ('cayley_best_vitd', 'Cayley-STRING is the best ViTD encoding', _claim_best('vitd', 'cayley')),
    ('grid_depth_ge_camera_xyz', 'ViTD grid_depth (paper) >= camera_xyz (ours), same encoding',
     _claim_grid_depth_ge_xyz),
)


def check_claims(cells: Cells) -> list[Claim]:
    """Every claim of :data:`CLAIMS` on both statistics (best of seeds, mean over seeds)."""
    return [Claim(key, statement, {s: fn(cells, s) for s in STATISTICS}) for key, statement, fn in CLAIMS]


# ----------------------------------------------------------------------------------------------------------------
# Summary and Markdown
# ----------------------------------------------------------------------------------------------------------------

def summarise(runs: Sequence[Mapping[str, Any]], metric: str = 'avg_best_iou') -> dict[str, Any]:
    """Runs -> ``{'cells': {encoder: {encoding: Cell.to_dict()}}, 'claims': [...], 'paper': {...}}`` (JSON-ready)."""
    cells = cells_from_runs(runs, metric)
    paper = paper_cells()
    return {
        'metric': metric,
        'cells': {enc: {e: c.to_dict() for e, c in row.items()} for enc, row in cells.items()},
        'claims': [c.to_dict() for c in check_claims(cells)],
        'paper': {'cells': {enc: {e: c.to_dict() for e, c in row.items()} for enc, row in paper.items()},
                  'claims': [c.to_dict() for c in check_claims(paper)]},
    }


DEFAULT_MODEL_ENCODERS = ('vitd', 'vitd_xyz')     # the runs that may replace the shipped model (RGB-D in, node-ready)


def default_model_decision(runs: Sequence[Mapping[str, Any]], reference: Mapping[str, Any] | None,
                           metric: str = 'avg_best_iou') -> dict[str, Any] | None:
    """Issue 8's last point: the best single ViTD run on the test split against ``reference`` (the shipped model,
    scored by the benchmark on the same seeds); ship it only if it is strictly better. ``None`` without either."""
    candidates = [r for r in runs if r['encoder'] in DEFAULT_MODEL_ENCODERS]
    if reference is None or not candidates:
        return None
    best = max(candidates, key=lambda r: r['test'][metric])
    ours, ref = 100.0 * best['test'][metric], 100.0 * reference['test'][metric]
    return {'config': best['config'], 'seed': best['seed'], 'ours': ours, 'reference': ref,
            'reference_path': reference['path'], 'reference_step': reference['checkpoint_step'],
            'same_scenes': bool(reference['same_scenes']), 'margin': ours - ref, 'ship': ours > ref}


def render_decision(decision: Mapping[str, Any]) -> list[str]:
    """The decision as a Markdown section."""
    verdict = ('**ship it**: it beats the shipped model' if decision['ship'] else
               '**keep the shipped model**: the best run does not beat it')
    scenes = ('' if decision['same_scenes'] else ' (rendered with the shipped model\'s own scene settings, which '
              'differ from the runs\')')
    return ['## Default model', '',
            f"Best ViTD run: `{decision['config']}` seed {decision['seed']}, {decision['ours']:.2f}. Shipped "
            f"`{decision['reference_path']}` (step {decision['reference_step']}) on the same test seeds, decoded "
            f"the same way{scenes}: {decision['reference']:.2f}. Margin {decision['margin']:+.2f} points: "
            f'{verdict}.']


def _fmt(v: float | None, digits: int = 2) -> str:
    return '–' if v is None or (isinstance(v, float) and math.isnan(v)) else f'{v:.{digits}f}'


def _rows(title: str, row: Mapping[str, Mapping[str, Any]], bold_best: bool) -> list[str]:
    best = max((row[e]['best'] for e in COLUMNS if e in row), default=None)
    cells_best, cells_mean = [], []
    for e in COLUMNS:
        c = row.get(e)
        if c is None:
            cells_best.append('–')
            cells_mean.append('–')
            continue
        b = _fmt(c['best'])
        cells_best.append(f'**{b}**' if bold_best and c['best'] == best else b)
        cells_mean.append(f"{_fmt(c['mean'])} ± {_fmt(c['std'])} (n={c['n']})")
    return [f'| {title} | best | ' + ' | '.join(cells_best) + ' |',
            f'| {title} | mean ± std | ' + ' | '.join(cells_mean) + ' |']


def _verdict_text(claim: Mapping[str, Any], stat: str) -> str:
    comps = claim['comparisons'].get(stat, [])
    noisy = sum(c['within_noise'] for c in comps)
    return claim['verdict'][stat] + (f' ({noisy}/{len(comps)} within seed std)' if noisy else '')


def _claim_details(claim: Mapping[str, Any], stat: str) -> str:
    """The failing comparisons (all of them when none fails) with their margins; '~' marks a margin within the
    seed standard deviation."""
    comps = claim['comparisons'].get(stat, [])
    failed = [c for c in comps if not c['ok']]
    shown = failed or comps
    text = '; '.join(f"{c['lhs']} − {c['rhs']} = {c['margin']:+.2f}{' ~' if c['within_noise'] else ''}"
                     for c in shown)
    return (f'fails {len(failed)}/{len(comps)}: ' if failed else 'all hold: ') + text if comps else ''


def render_markdown(summary: Mapping[str, Any], header: Sequence[str] = ()) -> str:
    """The table (ours next to the paper's, best and mean ± std per cell) and the claims, as Markdown."""
    cols = ' | '.join(ENCODING_TITLES[e] for e in COLUMNS)
    lines = ['# STRING paper Table 4 on the generated benchmark', '', *header, '',
             f"## Average 3D IoU (%) on the held-out test split ({summary['metric']})", '',
             f'| encoder | statistic | {cols} |', '|' + ' --- |' * (2 + len(COLUMNS))]
    ours, paper = summary['cells'], summary['paper']['cells']
    for enc in ENCODER_TITLES:
        if enc in ours:
            lines += _rows(f'{ENCODER_TITLES[enc]} (ours)', ours[enc], bold_best=True)
        if enc in paper:
            lines += _rows(f'{ENCODER_TITLES[enc]} (paper)', paper[enc], bold_best=True)
    lines += ['', 'Paper: best = Table 4 (max of 3 seeds), mean ± std over its Table 6 runs (two ViT RoPE-M runs and '
              'one ViT Circulant run stuck in a poor local minimum, App. F.4). Bold: best encoding of the row.', '',
              '## The paper\'s claims on our numbers', '',
              '| claim | ours, best of seeds | ours, mean over seeds | paper (best / mean) | margins (IoU points, '
              'best of seeds) |', '| --- | --- | --- | --- | --- |']
    paper_claims = {c['key']: c for c in summary['paper']['claims']}
    for claim in summary['claims']:
        pc = paper_claims[claim['key']]
        lines.append(f"| {claim['statement']} | {_verdict_text(claim, 'best')} | {_verdict_text(claim, 'mean')} | "
                     f"{pc['verdict']['best']} / {pc['verdict']['mean']} | {_claim_details(claim, 'best')} |")
    lines += ['', "'untested': the configurations the claim compares were not run. '~' / 'within seed std': the "
              'margin is no larger than the seed standard deviation of either cell, so that ordering may be luck.']
    return '\n'.join(lines) + '\n'


def render_cells(summary: Mapping[str, Any], title: str) -> str:
    """Only our cells of ``summary`` (best and mean ± std) under ``title``: a second metric next to the headline."""
    cols = ' | '.join(ENCODING_TITLES[e] for e in COLUMNS)
    lines = [f'## {title} ({summary["metric"]})', '', f'| encoder | statistic | {cols} |',
             '|' + ' --- |' * (2 + len(COLUMNS))]
    for enc in ENCODER_TITLES:
        if enc in summary['cells']:
            lines += _rows(f'{ENCODER_TITLES[enc]} (ours)', summary['cells'][enc], bold_best=True)
    return '\n'.join(lines) + '\n'


__all__ = ['ENCODINGS', 'EXTRA_ENCODINGS', 'COLUMNS', 'ENCODING_TITLES', 'ENCODER_TITLES', 'PAPER_TABLE6',
           'STATISTICS', 'Cell', 'Comparison', 'Claim', 'CLAIMS', 'cells_from_runs', 'paper_cells', 'check_claims', 'summarise', 'render_markdown',
           'render_cells',
           'DEFAULT_MODEL_ENCODERS', 'default_model_decision', 'render_decision']
