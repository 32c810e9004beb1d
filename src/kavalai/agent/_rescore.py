"""The second stage of tool search: the first stage's best candidates re-scored by what their names say.

The first stage (BM25 and embedding scores, each scaled to 0..1 and added) finds the right tool among its first 50
for nearly every request, but not always first: the meaning's larger weight can bury a rare exact word
("backfill" in ``create_backfill``) under tools that are only near in meaning, and neither ranking knows that
"open a bug" asks to create. :class:`Rescorer`
adds to each candidate's first-stage score (scaled so the best is 1):

- :data:`NAME_WEIGHT` times the rarest query word found in the tool's name or its server's name, by that word's
  rarity among the catalogue's names (1 for a word one name of 1,000 has, falling to 0 for a word every name has),
  and the best tool with a rare one (:data:`RARE`) is never ranked below place :data:`FLOOR`;
- :data:`SERVER_WEIGHT` when the request names the tool's server ("... in notion", "my github repo"), by its name
  or by a short form of it: a word of at least :data:`SHORT_FORM` letters that begins one server's name and no other's
  ("mongo" for ``mongodb``, "elastic" for ``elasticsearch``);
- :data:`ACTION_WEIGHT` when the action the request asks for (create, start, update, delete, read; see
  :mod:`kavalai.agent._vocabulary`) is the one the tool's name says, and minus it when they conflict (a read asked,
  a change done; or a create asked, a delete done).

It reads only names, so it costs a few dictionary lookups per candidate, whatever the catalogue's size.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Final

from kavalai.agent._vocabulary import ACTIONS, Action, action, tool_action

__all__ = ["ACTION_WEIGHT", "FLOOR", "NAME_WEIGHT", "RARE", "SERVER_WEIGHT", "SHORT_FORM", "Rescorer"]

#: The bonus for the rarest query word in a tool's name (or its server's), at full rarity.
NAME_WEIGHT: Final = 0.1
#: The bonus for a tool of a server the request names.
SERVER_WEIGHT: Final = 0.25
#: The fewest letters of a word that names a server by the start of its name (shorter ones, "line" for ``linear``,
#: are words of their own too often).
SHORT_FORM: Final = 5
#: The bonus (or, for a conflict, the penalty) for the action the tool's name says against the one asked for.
ACTION_WEIGHT: Final = 0.05
#: A query word this rare among the names (see :class:`Rescorer`) is a rare exact match: the best tool with one
#: is never ranked below place :data:`FLOOR` (counted from 0).
RARE: Final = 0.5
FLOOR: Final = 2
# Rarity is log(tools / tools with the word) over log of this many tools at least: in a catalogue of ten, a word
# in one name is common enough that the meaning should decide; in one of 300, a word in 9 names is rare.
_RARITY_SCALE: Final = 1_000


def _conflict(asked: Action, done: Action) -> bool:
    if (asked == "read") != (done == "read"):
        return True
    return {asked, done} == {"create", "delete"}


class Rescorer:
    """The names of a catalogue's tools, read for the second stage.

    Args:
        servers: each tool's server name ("" for none), lower case.
        name_words: each tool's name's words (lower case, without the server).
        name_stems: each tool's name's and server's stems.
    """

    def __init__(self, servers: Sequence[str], name_words: Sequence[list[str]], name_stems: Sequence[set[str]]) -> None:
        self._servers = list(servers)
        self._named = {server for server in servers if server}
        self._short = _short_forms(self._named)
        self._actions = [tool_action(found) for found in name_words]
        self._stems = list(name_stems)
        counts: Counter[str] = Counter()
        for stems in name_stems:
            counts.update(stems)
        total = max(len(name_stems), 1)
        scale = math.log(max(total, _RARITY_SCALE))
        self._rarity = {stem: math.log(total / count) / scale for stem, count in counts.items()}

    def rescore(
        self,
        query_words: list[str],
        query_stems: list[str],
        candidates: Sequence[int],
        scores: Sequence[float],
        *,
        servers: Sequence[str] = (),
    ) -> list[int]:
        """``candidates`` (places of tools, with their first-stage ``scores``) best first after re-scoring;
        ``servers``: more words that may name a server (those of the query's URLs: "github" in a GitHub link)."""
        top = max(scores, default=0.0) or 1.0
        asked = action(query_words)
        said = [*query_words, *servers]
        named = self._named.intersection(said).union(self._short[word] for word in said if word in self._short)
        rare = {stem: self._rarity[stem] for stem in query_stems if stem in self._rarity}
        rare_stems, stems, tools_servers, actions = set(rare), self._stems, self._servers, self._actions
        bonus: dict[Action, float] = dict.fromkeys(ACTIONS, 0.0)
        if asked is not None:  # what each action the tool's name says adds: the same, a conflict, or neither
            bonus = {
                done: ACTION_WEIGHT if asked == done else -ACTION_WEIGHT if _conflict(asked, done) else 0.0
                for done in bonus
            }
        rarity = rare.__getitem__
        ranked: list[tuple[float, int]] = []
        exact: set[int] = set()
        for index, score in zip(candidates, scores, strict=True):  # a loop of lookups: ~60 candidates, any catalogue
            value = score / top
            if rare_stems and (shared := stems[index] & rare_stems):
                found = max(map(rarity, shared))
                value += NAME_WEIGHT * found
                if found >= RARE:
                    exact.add(index)
            if tools_servers[index] in named:
                value += SERVER_WEIGHT
            if (done := actions[index]) is not None:
                value += bonus[done]
            ranked.append((-value, index))
        ranked.sort()
        order = [index for _, index in ranked]
        return _promoted(order, [index for index in order if index in exact]) if exact else order


def _short_forms(servers: set[str]) -> dict[str, str]:
    """Each start of a server's name of at least :data:`SHORT_FORM` letters that begins no other server's name (nor is
    another's whole name), and that server."""
    found: dict[str, str | None] = {}
    for server in servers:
        for end in range(SHORT_FORM, len(server)):
            start = server[:end]
            found[start] = server if found.get(start, server) == server else None
    return {start: server for start, server in found.items() if server is not None and start not in servers}


def _promoted(ranked: list[int], exact: list[int]) -> list[int]:
    """``ranked`` with the best of the ``exact`` matches moved up to place :data:`FLOOR` where it was lower."""
    if not exact or ranked.index(exact[0]) <= FLOOR:
        return ranked
    rest = [index for index in ranked if index != exact[0]]
    return [*rest[:FLOOR], exact[0], *rest[FLOOR:]]
