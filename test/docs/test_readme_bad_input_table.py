"""The bad-input table of docs/reliability.md has one row per catalogue item of the DDS test
(test_node_bad_input.py), in its order, with the /diagnostics key the test checks, and says refused / processed as the
test expects."""
from pathlib import Path

from test.support.reliability_peers import COMPRESSED_ITEMS, ITEMS

PAGE = Path(__file__).resolve().parents[2] / 'docs' / 'reliability.md'


def _rows():
    section = PAGE.read_text().split('\n## Bad-input catalogue\n', 1)[1].split('\n## ', 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith('| `')]
    out = []
    for ln in lines:
        cells = [c.strip() for c in ln.strip('|').split('|')]
        out.append((cells[0].strip('`'), cells[1], cells[2].strip('`'), cells[3]))
    return out


def test_every_catalogue_item_is_a_row_with_its_key_and_outcome():
    rows = _rows()
    items = {**ITEMS, **COMPRESSED_ITEMS}
    assert [r[0] for r in rows] == list(items)
    for name, inp, key, outcome in rows:
        want_key, _, processed = items[name]
        assert key == want_key, name
        assert outcome.startswith('processed') == processed, (name, outcome)
        assert inp, name
