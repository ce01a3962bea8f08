"""Realistic synthetic agent histories, in the JSON form pydantic-ai persists them.

The demo, the benchmarks and the tests need message histories shaped like the
ones a step store snapshots: many small parts, a few screenshots and uploaded
images (some sent again later), and the odd huge tool output. The functions here
build exactly what ``ModelMessagesTypeAdapter.dump_python(messages, mode='json')``
produces for such messages (``BinaryContent.data`` as URL-safe base64 with
padding), deterministically from a seed, without importing pydantic-ai.
Image bytes are random (incompressible) behind a PNG header. Private, so
production code (the demo, tune) does not import the test kit;
``mediastash.testing`` exports its names for users.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

__all__ = [
    'KiB',
    'MiB',
    'HistoryStats',
    'agent_history',
    'copy_tree',
    'describe_history',
    'image_sizes',
    'json_size',
    'small_parts_history',
    'step_snapshots',
]

KiB: Final = 1 << 10
MiB: Final = 1 << 20

_PNG_SIGNATURE: Final = b'\x89PNG\r\n\x1a\n'
_START: Final = datetime(2025, 6, 2, 9, 30, tzinfo=UTC)
_MODEL: Final = 'gpt-5'
_PROVIDER: Final = 'openai'
_SMALL_TEXT_MAX: Final = 4 * KiB
_TOOLS: Final = ('search_docs', 'read_file', 'run_tests', 'list_directory', 'grep', 'http_get')
_NON_ASCII: Final = 'naïve café — 東京 ✓ '

Tree = list[dict[str, Any]]


# -- public builders -----------------------------------------------------------------------


def agent_history(
    *,
    steps: int = 50,
    image_bytes_total: int = 40 * MiB,
    image_min_bytes: int = 50 * KiB,
    image_max_bytes: int = 2 * MiB,
    reused_images: int = 5,
    large_tool_outputs: int = 4,
    large_tool_output_min_bytes: int = 100 * KiB,
    large_tool_output_max_bytes: int = 500 * KiB,
    small_parts_per_step: int = 8,
    seed: int = 0,
) -> Tree:
    """A run of ``steps`` model round trips, as a list of JSON message dicts.

    The history opens with a system prompt and a user prompt; each step then adds
    a ``ModelResponse`` (thinking, text, tool calls) and a ``ModelRequest`` (the
    tool returns, sometimes a user prompt). Distinct images decode to exactly
    ``image_bytes_total`` bytes in all, each between ``image_min_bytes`` and
    ``image_max_bytes``; they arrive as user uploads or screenshot tool returns.
    ``reused_images`` later parts carry an earlier image again (the same base64
    string, as when a user re-sends it; none with a single step or no image).
    ``large_tool_outputs`` tool returns hold text between the two
    ``large_tool_output_*`` bounds in UTF-8 bytes. Each step
    also has ``small_parts_per_step`` filler parts (thinking, text, tool calls
    and their returns) under 4 KiB each. The same arguments give the same tree.
    """
    _check_count('steps', steps, minimum=1)
    _check_count('reused_images', reused_images)
    _check_count('large_tool_outputs', large_tool_outputs)
    _check_count('small_parts_per_step', small_parts_per_step)
    _check_bounds('large_tool_output', large_tool_output_min_bytes, large_tool_output_max_bytes, minimum=64)
    rng = random.Random(seed)
    sizes = image_sizes(image_bytes_total, image_min_bytes, image_max_bytes, rng=rng)
    words = _vocabulary(rng)
    builder = _Builder(rng, words, seed)

    # Plan which step introduces which image, and where images come back.
    introduced: list[list[int]] = [[] for _ in range(steps)]
    image_step: list[int] = []
    for index in range(len(sizes)):
        step = rng.randrange(steps)
        introduced[step].append(index)
        image_step.append(step)
    reused: list[list[int]] = [[] for _ in range(steps)]
    for _ in range(reused_images if sizes and steps > 1 else 0):
        index = rng.randrange(len(sizes))
        if image_step[index] == steps - 1:  # move it earlier so it can come back later
            introduced[steps - 1].remove(index)
            image_step[index] = rng.randrange(steps - 1)
            introduced[image_step[index]].append(index)
        reused[rng.randrange(image_step[index] + 1, steps)].append(index)
    large_at = [rng.randrange(steps) for _ in range(large_tool_outputs)]

    images = [builder.binary(_png_bytes(rng, size)) for size in sizes]
    history: Tree = [builder.first_request()]
    for step in range(steps):
        calls: list[dict[str, Any]] = []
        returns: list[dict[str, Any]] = []
        user_content: list[Any] = []
        placements = [(index, False) for index in introduced[step]] + [(index, True) for index in reused[step]]
        for index, again in placements:
            if rng.random() < 0.5:
                caption = 'Here is that screenshot again:' if again else 'Here is what I see on my screen:'
                user_content += [builder.sentence(6, 20) + ' ' + caption, images[index]]
            else:
                call = builder.tool_call('read_image' if again else 'take_screenshot', {'target': builder.word()})
                calls.append(call)
                returns.append(builder.tool_return(call, images[index]))
        for _ in range(large_at.count(step)):
            call = builder.tool_call('read_file', {'path': builder.path()})
            calls.append(call)
            size = rng.randint(large_tool_output_min_bytes, large_tool_output_max_bytes)
            returns.append(builder.tool_return(call, builder.large_text(size)))
        response_parts, filler_returns = builder.filler(small_parts_per_step)
        if not response_parts and not calls:
            response_parts.append(builder.text(40, 600))  # a response always says something
        request_parts = filler_returns + returns
        if user_content:
            request_parts.append(builder.user_prompt(user_content))
        if not request_parts:
            request_parts.append(builder.user_prompt(builder.sentence(4, 12)))
        history.append(builder.response(response_parts + calls))
        history.append(builder.request(request_parts))
    return history


def small_parts_history(parts: int = 5000, *, seed: int = 0) -> Tree:
    """A history of exactly ``parts`` message parts, none of them near the 64 KiB threshold.

    Text parts are 40 B to 2 KiB, tool arguments and returns a few hundred bytes,
    and one user prompt in 25 carries a small image (1 to 24 KiB). It measures
    what the walker costs when there is nothing to move.
    """
    _check_count('parts', parts)
    rng = random.Random(seed)
    builder = _Builder(rng, _vocabulary(rng), seed)
    history: Tree = []
    remaining = parts
    while remaining:
        count = min(remaining, rng.randint(4, 12))
        remaining -= count
        history.extend(builder.small_round(count))
    return history


def step_snapshots(history: Sequence[dict[str, Any]], *, fresh: bool = True) -> Iterator[list[Any]]:
    """Yield the history as a step store snapshots it: the prefix after each settled step.

    A step ends with each ``ModelRequest`` that follows a ``ModelResponse``; the
    whole history is yielded last if it does not end that way. With ``fresh``
    each snapshot is a new tree whose long strings are new (equal, not
    identical) objects, as a new ``dump_python`` call would produce, so a cache
    cannot win by comparing object identity.
    """
    seen_response = False
    last = -1
    for index, message in enumerate(history):
        kind = message.get('kind')
        if kind == 'response':
            seen_response = True
        elif kind == 'request' and seen_response:
            last = index
            prefix = list(history[: index + 1])
            yield copy_tree(prefix) if fresh else prefix
    if last != len(history) - 1:
        prefix = list(history)
        yield copy_tree(prefix) if fresh else prefix


def copy_tree(tree: Any, *, fresh_strings_from: int = 1024) -> Any:
    """Deep copy of a JSON tree; strings of ``fresh_strings_from`` chars or more become new objects."""
    if isinstance(tree, dict):
        return {key: copy_tree(value, fresh_strings_from=fresh_strings_from) for key, value in tree.items()}
    if isinstance(tree, list):
        return [copy_tree(value, fresh_strings_from=fresh_strings_from) for value in tree]
    if isinstance(tree, str) and len(tree) >= fresh_strings_from:
        return tree.encode('utf-8', 'surrogatepass').decode('utf-8', 'surrogatepass')
    return tree


def image_sizes(total: int, minimum: int, maximum: int, *, rng: random.Random) -> list[int]:
    """Random sizes in ``[minimum, maximum]`` that add up to exactly ``total`` (``[]`` for 0)."""
    _check_bounds('image', minimum, maximum, minimum=len(_PNG_SIGNATURE) + 25)
    if maximum < 2 * minimum:
        raise ValueError(f'image_max_bytes ({maximum}) must be at least twice image_min_bytes ({minimum})')
    if isinstance(total, bool) or not isinstance(total, int) or total < 0:
        raise ValueError(f'image_bytes_total must be a non-negative int, got {total!r}')
    if 0 < total < minimum:
        raise ValueError(f'image_bytes_total ({total}) is below image_min_bytes ({minimum}); use 0 for no images')
    sizes: list[int] = []
    remaining = total
    while remaining > maximum:
        size = rng.randint(minimum, min(maximum, remaining - minimum))
        sizes.append(size)
        remaining -= size
    if remaining:
        sizes.append(remaining)
    rng.shuffle(sizes)
    return sizes


# -- measuring -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HistoryStats:
    """What a history holds, counted the way the walker sees it."""

    messages: int
    parts: int
    json_bytes: int
    binary_parts: int
    large_binary_parts: int
    distinct_large_binaries: int
    large_binary_bytes: int
    """Decoded bytes of the distinct binaries at or above the threshold (what a store would hold)."""
    large_texts: int
    large_text_bytes: int
    largest_small_payload: int
    """The biggest binary or text payload below the threshold, in bytes."""


def describe_history(history: Sequence[dict[str, Any]], *, threshold: int = 64 * KiB) -> HistoryStats:
    """Count parts, payloads above/below ``threshold`` and the compact JSON size of ``history``."""
    binaries: dict[str, int] = {}
    binary_parts = large_binary_parts = large_texts = large_text_bytes = largest_small = 0
    stack: list[Any] = list(history)
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        data = node.get('data')
        content = node.get('content')
        if node.get('kind') == 'binary' and isinstance(data, str):
            binary_parts += 1
            size = len(base64.urlsafe_b64decode(data))
            if size >= threshold:
                large_binary_parts += 1
                binaries[data] = size
            else:
                largest_small = max(largest_small, size)
        elif isinstance(content, str) and 'part_kind' in node:
            size = len(content.encode('utf-8', 'surrogatepass'))
            if size >= threshold:
                large_texts += 1
                large_text_bytes += size
            else:
                largest_small = max(largest_small, size)
        stack.extend(value for value in node.values() if isinstance(value, dict | list))
    return HistoryStats(
        messages=len(history),
        parts=sum(len(message.get('parts', ())) for message in history),
        json_bytes=json_size(history),
        binary_parts=binary_parts,
        large_binary_parts=large_binary_parts,
        distinct_large_binaries=len(binaries),
        large_binary_bytes=sum(binaries.values()),
        large_texts=large_texts,
        large_text_bytes=large_text_bytes,
        largest_small_payload=largest_small,
    )


def json_size(tree: object) -> int:
    """Bytes of the compact UTF-8 JSON of ``tree`` (what a store writes, give or take whitespace)."""
    text = json.dumps(tree, ensure_ascii=False, separators=(',', ':'))
    return len(text.encode('utf-8', 'surrogatepass'))


# -- internals -----------------------------------------------------------------------------


def _check_count(name: str, value: object, *, minimum: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f'{name} must be an int >= {minimum}, got {value!r}')


def _check_bounds(name: str, low: object, high: object, *, minimum: int) -> None:
    _check_count(f'{name}_min_bytes', low, minimum=minimum)
    _check_count(f'{name}_max_bytes', high, minimum=minimum)
    assert isinstance(low, int) and isinstance(high, int)
    if high < low:
        raise ValueError(f'{name}_max_bytes ({high}) is below {name}_min_bytes ({low})')


def _png_bytes(rng: random.Random, size: int) -> bytes:
    """``size`` bytes: a PNG signature and IHDR chunk, then random (incompressible) bytes."""
    width, height = rng.randint(64, 4096), rng.randint(64, 4096)
    ihdr = struct.pack('>IIBBBBB', width, height, 8, 6, 0, 0, 0)
    chunk = b'IHDR' + ihdr
    header = _PNG_SIGNATURE + struct.pack('>I', len(ihdr)) + chunk + struct.pack('>I', zlib.crc32(chunk))
    return header + rng.randbytes(size - len(header))


def _vocabulary(rng: random.Random) -> list[str]:
    syllables = [c + v for c in 'bcdfghjklmnprstvwz' for v in 'aeiou'] + ['th', 'qu', 'st', 'er', 'an']
    return [''.join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(1500)]


class _Builder:
    """Makes the individual JSON dicts, with field order and values as pydantic-ai dumps them."""

    def __init__(self, rng: random.Random, words: list[str], seed: int) -> None:
        self.rng = rng
        self.words = words
        self.clock = _START + timedelta(seconds=seed % 86_400)
        self.run_id = self.hex_id(32)
        self.conversation_id = self.hex_id(32)

    # small values

    def hex_id(self, length: int) -> str:
        return f'{self.rng.getrandbits(4 * length):0{length}x}'

    def tick(self) -> str:
        self.clock += timedelta(milliseconds=self.rng.randint(5, 9000))
        stamp = self.clock
        fraction = f'.{stamp.microsecond:06d}' if stamp.microsecond else ''
        return f'{stamp:%Y-%m-%dT%H:%M:%S}{fraction}Z'

    def word(self) -> str:
        return self.rng.choice(self.words)

    def path(self) -> str:
        parts = self.rng.choices(self.words, k=self.rng.randint(1, 4))
        return 'src/' + '/'.join(parts) + self.rng.choice(('.py', '.md', '.json', '.log', '.txt'))

    def sentence(self, low: int, high: int) -> str:
        text = ' '.join(self.rng.choices(self.words, k=self.rng.randint(low, high)))
        if self.rng.random() < 0.1:
            text += ' ' + _NON_ASCII.strip()
        return text[:1].upper() + text[1:] + '.'

    def prose(self, low: int, high: int) -> str:
        """Text of ``low`` to ``high`` characters (short texts may include non-ASCII)."""
        target = self.rng.randint(low, high)
        pieces: list[str] = []
        length = 0
        while length < target:
            piece = self.sentence(4, 18)
            pieces.append(piece)
            length += len(piece) + 1
        return ' '.join(pieces)[:target]

    def arguments(self) -> dict[str, Any] | str:
        args: dict[str, Any] = {'query': self.sentence(2, 8), 'limit': self.rng.randint(1, 50)}
        if self.rng.random() < 0.3:
            args['path'] = self.path()
        if self.rng.random() < 0.25:
            return json.dumps(args)  # providers sometimes hand back arguments as a JSON string
        return args

    def small_output(self) -> str:
        lines = [
            f'{self.path()}:{self.rng.randint(1, 900)}: {self.sentence(3, 14)}' for _ in range(self.rng.randint(1, 12))
        ]
        return '\n'.join(lines)[:_SMALL_TEXT_MAX]

    def large_text(self, size: int) -> str:
        """Log-like text of exactly ``size`` UTF-8 bytes (a non-ASCII header, ASCII lines after)."""
        header = f'# {_NON_ASCII}output of {self.path()}\n'
        budget = size - len(header.encode())
        lines: list[str] = []
        length = 0
        levels = ('DEBUG', 'INFO', 'INFO', 'INFO', 'WARN', 'ERROR')
        while length < budget:
            self.clock += timedelta(microseconds=self.rng.randint(1, 400_000))
            line = (
                f'{self.clock:%Y-%m-%dT%H:%M:%S.%f}Z {self.rng.choice(levels):5} '
                f'worker-{self.rng.randint(0, 15)} {self.word()}.{self.word()} '
                f'id={self.hex_id(12)} latency={self.rng.randint(1, 3000)}ms {self.sentence(2, 10)}'
            )
            lines.append(line)
            length += len(line) + 1
        return header + '\n'.join(lines)[:budget]

    # parts

    def binary(self, raw: bytes) -> dict[str, Any]:
        return {
            'data': base64.urlsafe_b64encode(raw).decode('ascii'),
            'media_type': 'image/png',
            'vendor_metadata': None,
            'kind': 'binary',
            'identifier': hashlib.sha1(raw, usedforsecurity=False).hexdigest()[:6],
        }

    def thinking(self, low: int, high: int) -> dict[str, Any]:
        return {
            'content': self.prose(low, high),
            'id': None,
            'signature': base64.b64encode(self.rng.randbytes(self.rng.randint(96, 480))).decode('ascii'),
            'provider_name': None,
            'provider_details': None,
            'part_kind': 'thinking',
        }

    def text(self, low: int, high: int) -> dict[str, Any]:
        return {
            'content': self.prose(low, high),
            'id': None,
            'provider_name': None,
            'provider_details': None,
            'citations': None,
            'part_kind': 'text',
        }

    def tool_call(self, tool_name: str, args: dict[str, Any] | str) -> dict[str, Any]:
        return {
            'tool_name': tool_name,
            'args': args,
            'tool_call_id': 'call_' + self.hex_id(24),
            'tool_kind': None,
            'id': None,
            'provider_name': None,
            'provider_details': None,
            'part_kind': 'tool-call',
        }

    def tool_calls(self, count: int, response: list[dict[str, Any]], request: list[dict[str, Any]]) -> None:
        """``count`` tool calls appended to ``response``, each one's small return to ``request``."""
        for _ in range(count):
            call = self.tool_call(self.rng.choice(_TOOLS), self.arguments())
            response.append(call)
            request.append(self.tool_return(call, self.small_output()))

    def tool_return(self, call: dict[str, Any], content: Any) -> dict[str, Any]:
        return {
            'tool_name': call['tool_name'],
            'content': content,
            'tool_call_id': call['tool_call_id'],
            'tool_kind': None,
            'metadata': None,
            'timestamp': self.tick(),
            'outcome': 'success',
            'retry': None,
            'part_kind': 'tool-return',
        }

    def user_prompt(self, content: str | list[Any]) -> dict[str, Any]:
        return {'content': content, 'timestamp': self.tick(), 'part_kind': 'user-prompt'}

    def filler(self, count: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """``count`` small parts: thinking, text, then tool call / tool return pairs (odd: one more text)."""
        response: list[dict[str, Any]] = []
        returns: list[dict[str, Any]] = []
        if count >= 1:
            response.append(self.thinking(200, 3 * KiB))
        if count >= 2:
            response.append(self.text(40, 1500))
        pairs, extra = divmod(max(count - 2, 0), 2)
        if extra:
            response.append(self.text(40, 600))
        self.tool_calls(pairs, response, returns)
        return response, returns

    def small_round(self, count: int) -> list[dict[str, Any]]:
        """A response and a request with ``count`` small parts between them, ending with a user prompt.

        One prompt in 25 carries a small image (1 to 24 KiB).
        """
        if self.rng.random() < 0.04:
            icon = self.binary(_png_bytes(self.rng, self.rng.randint(1 * KiB, 24 * KiB)))
            prompt = self.user_prompt([self.sentence(3, 12), icon])
        else:
            prompt = self.user_prompt(self.sentence(3, 30))
        if count == 1:
            return [self.request([prompt])]
        response: list[dict[str, Any]] = [self.text(40, 2 * KiB)]
        request: list[dict[str, Any]] = []
        if count >= 3:
            response.insert(0, self.thinking(40, 600))
            pairs, extra = divmod(count - 3, 2)
            if extra:
                response.append(self.text(40, 400))
            self.tool_calls(pairs, response, request)
        request.append(prompt)
        return [self.response(response), self.request(request)]

    # messages

    def first_request(self) -> dict[str, Any]:
        stamp = self.tick()
        system = {
            'content': 'You are a careful coding assistant. ' + self.prose(200, 1200),
            'timestamp': stamp,
            'dynamic_ref': None,
            'scope': 'conversation',
            'metadata': None,
            'part_kind': 'system-prompt',
        }
        prompt = {'content': self.sentence(8, 40), 'timestamp': stamp, 'part_kind': 'user-prompt'}
        return self.request([system, prompt], timestamp=stamp)

    def request(self, parts: list[dict[str, Any]], *, timestamp: str | None = None) -> dict[str, Any]:
        return {
            'parts': parts,
            'timestamp': timestamp or self.tick(),
            'instructions': None,
            'kind': 'request',
            'run_id': self.run_id,
            'conversation_id': self.conversation_id,
            'metadata': None,
            'state': 'complete',
        }

    def response(self, parts: list[dict[str, Any]]) -> dict[str, Any]:
        has_calls = any(part['part_kind'] == 'tool-call' for part in parts)
        output_tokens = self.rng.randint(20, 4000)
        return {
            'parts': parts,
            'usage': {
                'input_tokens': self.rng.randint(500, 120_000),
                'cache_write_tokens': 0,
                'cache_write_1h_tokens': 0,
                'cache_read_tokens': self.rng.randint(0, 100_000),
                'output_tokens': output_tokens,
                'output_reasoning_tokens': self.rng.randint(0, output_tokens),
                'input_audio_tokens': 0,
                'cache_audio_read_tokens': 0,
                'output_audio_tokens': 0,
                'audio_seconds': 0.0,
                'details': {},
                'cost': None,
            },
            'model_name': _MODEL,
            'timestamp': self.tick(),
            'kind': 'response',
            'provider_name': _PROVIDER,
            'provider_url': None,
            'provider_details': None,
            'provider_response_id': 'resp_' + self.hex_id(32),
            'finish_reason': 'tool_call' if has_calls else 'stop',
            'run_id': self.run_id,
            'conversation_id': self.conversation_id,
            'metadata': None,
            'workspace_ref': None,
            'history_digest': None,
            'failed_attempts': None,
            'state': 'complete',
        }
