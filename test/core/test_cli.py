"""The shared command-line parsers (string_perception/cli.py)."""
import argparse

import pytest

from string_perception.cli import parse_kv, parse_seed_range


def test_seed_range_is_first_to_end_exclusive():
    assert parse_seed_range('1000:1050') == range(1000, 1050)
    assert list(parse_seed_range('0:3')) == [0, 1, 2]
    assert len(parse_seed_range('5:5')) == 0


@pytest.mark.parametrize('text', ['1000', '1:2:3', 'a:b', '', '1.5:3'])
def test_seed_range_refuses_anything_else(text):
    with pytest.raises(ValueError):
        parse_seed_range(text)


def test_kv_reads_json_values_and_falls_back_to_the_string():
    assert parse_kv('distractors=[2,6]') == ('distractors', [2, 6])
    assert parse_kv('object_split=train') == ('object_split', 'train')
    with pytest.raises(argparse.ArgumentTypeError):
        parse_kv('no_equals_sign')
