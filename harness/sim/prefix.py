"""Optional prefix cache of the simulator: an LRU of prompt blocks, like vLLM's automatic prefix caching.

A prompt is serialised (each message's role and content text, in order) and cut into blocks of
``block_tokens`` × 4 characters (the simulator counts 4 characters per token, see
:func:`harness.sim.lengths.estimate_prompt_tokens`). Each full block is identified by a chained hash (its text
and the hash of the block before it), so a block only matches when everything before it matches too. A lookup
counts the leading blocks already held; the prompt's blocks are then inserted (or refreshed) as most recently
used, and the least recently used blocks are evicted beyond ``capacity_tokens``.

``cached_tokens`` = matched blocks × ``block_tokens``, at most ``prompt_tokens - 1`` (the last prompt token is
always computed, as in vLLM). The engine prefills only the uncached tokens
(``prefill_base + prefill_per_token × (prompt_tokens - cached_tokens)``) and the usage reports
``prompt_tokens_details.cached_tokens``. Blocks are inserted at admission, not at the end of the prefill (a
simplification: two identical prompts arriving together both hit on the second). When a request finishes, the
server also inserts the blocks of its prompt followed by an assistant message holding the answer text it streamed
(:meth:`PrefixCache.insert`), as vLLM keeps the generated tokens' blocks: the next turn of a conversation that
carries the answer then hits on everything but its new user message.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from harness.sim.lengths import message_texts

__all__ = ["DEFAULT_BLOCK_TOKENS", "PrefixCache"]

#: Tokens per cache block (vLLM's default block size).
DEFAULT_BLOCK_TOKENS = 16
#: Characters per simulated token (the simulator's prompt-token estimate).
_CHARS_PER_TOKEN = 4


def _serialise(messages: Iterable[Any]) -> str:
    """The prompt as one string: ``role\\x00content\\x01`` per message (non-dict messages: empty role)."""
    msgs = list(messages)
    roles = [str(m.get("role", "")) if isinstance(m, dict) else "" for m in msgs]
    return "".join(f"{r}\x00{t}\x01" for r, t in zip(roles, message_texts(msgs), strict=True))


class PrefixCache:
    """LRU cache of prompt prefix blocks (see the module docstring).

    Args:
        capacity_tokens: tokens the cache holds (rounded down to whole blocks); must be >= ``block_tokens``.
        block_tokens: tokens per block (>= 1).

    Raises:
        ValueError: a capacity below one block, or a block size below 1.
    """

    def __init__(self, capacity_tokens: int, block_tokens: int = DEFAULT_BLOCK_TOKENS) -> None:
        if block_tokens < 1:
            raise ValueError(f"prefix cache block size must be >= 1 token, got {block_tokens}")
        if capacity_tokens < block_tokens:
            raise ValueError(
                f"prefix cache capacity must be >= one block ({block_tokens} tokens), got {capacity_tokens}"
            )
        self.block_tokens = block_tokens
        self.capacity_blocks = capacity_tokens // block_tokens
        self._blocks: OrderedDict[bytes, None] = OrderedDict()
        #: Lookups and lookups that matched at least one block.
        self.lookups = 0
        self.hits = 0

    def __len__(self) -> int:
        """Blocks held."""
        return len(self._blocks)

    def _block_keys(self, messages: Iterable[Any]) -> list[bytes]:
        text = _serialise(messages).encode("utf-8", "surrogatepass")
        size = self.block_tokens * _CHARS_PER_TOKEN
        keys: list[bytes] = []
        prev = b""
        for i in range(0, len(text) - size + 1, size):
            prev = hashlib.blake2b(prev + text[i:i + size], digest_size=16).digest()
            keys.append(prev)
        return keys

    def insert(self, messages: Iterable[Any]) -> None:
        """Hold the full blocks of ``messages`` as most recently used (evicting beyond the capacity)."""
        self._hold(self._block_keys(messages))

    def _hold(self, keys: list[bytes]) -> None:
        blocks = self._blocks
        for key in keys:
            if key in blocks:
                blocks.move_to_end(key)
            else:
                blocks[key] = None
        while len(blocks) > self.capacity_blocks:
            blocks.popitem(last=False)

    def lookup_insert(self, messages: Iterable[Any], prompt_tokens: int) -> int:
        """Cached tokens of this prompt (see the module docstring), then hold its blocks as most recently used.

        Args:
            messages: the request's chat messages.
            prompt_tokens: the request's prompt tokens (the cap of the result is ``prompt_tokens - 1``).

        Returns:
            Cached prompt tokens, 0..``prompt_tokens - 1``.
        """
        keys = self._block_keys(messages)
        blocks = self._blocks
        matched = 0
        for key in keys:
            if key not in blocks:
                break
            matched += 1
        self.lookups += 1
        if matched:
            self.hits += 1
        self._hold(keys)
        return max(0, min(matched * self.block_tokens, prompt_tokens - 1))
