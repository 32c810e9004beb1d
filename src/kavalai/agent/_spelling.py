"""Typo tolerance for tool search: a query word the catalogue does not know, one slip away from a word it does.

"git stauts" shares no word with ``git_status``, and neither BM25 nor a static embedding sees that "stauts" is
"status" with two letters swapped. :class:`Spelling` holds the catalogue's words under each of their one-letter
deletions (the symmetric-delete method of SymSpell): two words share a deletion, or one is a deletion of the other,
when they differ by a letter added, dropped, changed, or two neighbours swapped; of those, only a swap, or in long
words a letter dropped or added, is taken for a typo (:func:`_one_slip`). Looking a word up costs one
dictionary probe per letter, whatever the catalogue's size. Written here because the method is a few lines and
the spelling libraries on PyPI (symspellpy, pyspellchecker) bring a dictionary of English, which is not the
catalogue's vocabulary.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Final

__all__ = ["MIN_LENGTH", "MIN_LENGTH_DROPPED", "Spelling"]

#: Words shorter than this are never corrected: between short words one slip turns most words into others.
MIN_LENGTH: Final = 5
_MAX_LENGTH: Final = 40  # longer runs of letters are not words: never corrected (a lookup costs their length)
#: A letter dropped or added is corrected only between words this long ("broke" / "broken" are both words).
MIN_LENGTH_DROPPED: Final = 7


def _deletions(word: str) -> set[str]:
    return {word[:i] + word[i + 1 :] for i in range(len(word))}


class Spelling:
    """The words of a catalogue, to correct query words against.

    Args:
        words: every word of every tool, as written.
    """

    def __init__(self, words: Iterable[str]) -> None:
        counts: Counter[str] = Counter()
        for word, count in Counter(words).items():  # counted as written first: most words repeat
            lower = word.lower()
            if lower.isalpha():
                counts[lower] += count
        self._counts = counts
        self._near: dict[str, list[str]] = {}
        for word in counts:
            if not MIN_LENGTH <= len(word) <= _MAX_LENGTH:
                continue
            for key in _deletions(word) | {word}:
                self._near.setdefault(key, []).append(word)

    def __contains__(self, word: str) -> bool:
        return word in self._counts

    def correct(self, word: str) -> str | None:
        """The catalogue's word one typo away from ``word`` (the one the catalogue uses most, then the first
        alphabetically), or ``None`` when ``word`` is short, known, not a word, or near none."""
        if not MIN_LENGTH <= len(word) <= _MAX_LENGTH or not word.isalpha() or word in self._counts:
            return None
        found = {near for key in _deletions(word) | {word} for near in self._near.get(key, ())}
        found = {near for near in found if _one_slip(word, near)}
        if not found:
            return None
        return min(found, key=lambda near: (-self._counts[near], near))


def _one_slip(typed: str, known: str) -> bool:
    """``typed`` is ``known`` with two neighbouring letters swapped ("stauts" / "status"), or, in words of
    :data:`MIN_LENGTH_DROPPED` letters or more, with one letter dropped or added ("dirctory" / "directory").

    A changed letter is not corrected: it turns real words into other real words too often ("right" / "might",
    "charge" / "change"), and a user's word the catalogue lacks is more often a real word than a typo. A few real
    words are swaps of others ("quiet" / "quite", "trail" / "trial"): where the catalogue has only one of them, the
    other is read as it."""
    if len(typed) == len(known):
        differ = [i for i in range(len(typed)) if typed[i] != known[i]]
        return (
            len(differ) == 2
            and differ[1] == differ[0] + 1
            and typed[differ[0]] == known[differ[1]]
            and typed[differ[1]] == known[differ[0]]
        )
    if min(len(typed), len(known)) < MIN_LENGTH_DROPPED or abs(len(typed) - len(known)) != 1:
        return False
    short, long = sorted((typed, known), key=len)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))
