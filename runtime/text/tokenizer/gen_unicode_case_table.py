#!/usr/bin/env python3
"""Generate unicode_case_table.cpp: code point ranges of the cased letters the
tekken pre-tokenizer (Mistral-Nemo) tells apart: upper = \\p{Lu} or \\p{Lt},
lower = \\p{Ll}. Other letters (\\p{Lm}, \\p{Lo}) are neither here; the
scanner counts them, and marks, on both sides as the regex does.

Usage: python3 gen_unicode_case_table.py > unicode_case_table.cpp
Run it with Python 3.13 (Unicode 15.1, the version of the other tables).
"""
import os
import sys
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_unicode_table import write_range_table  # noqa: E402

UPPER, LOWER = 1, 2


def case_of(cp):
    cat = unicodedata.category(chr(cp))
    if cat in ("Lu", "Lt"):
        return UPPER
    if cat == "Ll":
        return LOWER
    return 0


def main():
    write_range_table(sys.stdout, "gen_unicode_case_table.py",
                      "of cased letters: 1 upper (Lu, Lt), 2 lower (Ll)", "kCaseRanges", case_of)


if __name__ == "__main__":
    main()
