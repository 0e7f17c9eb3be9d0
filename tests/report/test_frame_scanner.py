"""The compiled records scanner (harness/_fastrecords.pyx) behind ``harness.report.frame._parse``: the same frame as
polars' NDJSON reader on every record file we have and on odd-but-valid JSON, floats bit for bit, everything it does
not read exactly handed to polars (same errors), and the same report with and without it."""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import harness.report.frame as frame_mod
from harness.chunkpath import PURE_ENV
from harness.report.frame import (
    DEFAULT_COLUMNS,
    HIST_DTYPE,
    PART_COLUMNS,
    RAW_CHUNK_COLUMNS,
    RECORD_SCHEMA,
    read_frame,
)
from tests.benchmarks import load_benchmark
from tests.fuzz_settings import fuzz
from tests.report.rundir import rec

DATA = Path(__file__).resolve().parents[1] / "data"
ROOT = Path(__file__).resolve().parents[2]
#: The parse schemas the report reads with: the scalar columns, a Parquet part's, the second pass's, every field.
SCHEMAS = {name: frame_mod._parse_schema(frame_mod._schema(cols)) for name, cols in
           (("default", DEFAULT_COLUMNS), ("part", PART_COLUMNS), ("chunks", RAW_CHUNK_COLUMNS),
            ("all", tuple(RECORD_SCHEMA)))}


def scanner() -> Any:
    """The compiled scanner module; skips when it was not built (fails under ``LLMLOAD_REQUIRE_NATIVE=1``, as CI
    sets it)."""
    if not frame_mod.scanner_available():
        msg = "the compiled records scanner is not built (harness/_fastrecords.pyx: pip install -e . with a C compiler)"
        if os.environ.get("LLMLOAD_REQUIRE_NATIVE") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return frame_mod._SCANNER


def _buckets_as_pairs(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with each histogram's ``buckets`` text replaced by its ``(key, count)`` pairs, sorted: polars writes an
    object of more than 32 keys back in its hash map's order (random per process), the scanner in the written one."""
    for c in ("gap_hist", "itl_hist"):
        if c in df.columns and df.schema[c] == HIST_DTYPE:
            def pairs(t: str) -> str:
                if not t.startswith("{"):  # a string value is kept as its text
                    return t
                return json.dumps(sorted(json.loads(t).items()))
            b = pl.col(c).struct.field("buckets").map_elements(pairs, return_dtype=pl.String, skip_nulls=True)
            df = df.with_columns(pl.when(pl.col(c).is_null()).then(None)
                                 .otherwise(pl.col(c).struct.with_fields(b.alias("buckets"))).alias(c))
    return df


def _float_bits(s: pl.Series) -> list[int | None]:
    """The IEEE bits of a Float64 (or List(Float64), flattened) series' values, None for nulls: equal bits, not
    just equal values (``-0.0`` is not ``0.0`` here)."""
    if s.dtype == pl.List(pl.Float64):
        s = s.explode()
    return [None if v is None else struct.unpack("<q", struct.pack("<d", v))[0] for v in s.to_list()]


def assert_same_frame(ref: pl.DataFrame, got: pl.DataFrame) -> None:
    """``got`` is ``ref``: schema, values, nulls; floats bit for bit; histogram buckets as objects."""
    assert got.schema == ref.schema
    assert got.height == ref.height
    ref, got = _buckets_as_pairs(ref), _buckets_as_pairs(got)
    for c in ref.columns:
        assert got[c].equals(ref[c]), f"column {c} differs: {ref[c].head(3)} != {got[c].head(3)}"
        if ref.schema[c] in (pl.Float64, pl.List(pl.Float64)):
            assert _float_bits(got[c]) == _float_bits(ref[c]), f"column {c}: not the same bits"
        elif ref.schema[c] == HIST_DTYPE:
            for f in ("sum", "min", "max"):
                assert _float_bits(got[c].struct.field(f)) == _float_bits(ref[c].struct.field(f))


def scan_and_read(text: bytes, schema: dict[str, pl.DataType]) -> tuple[pl.DataFrame | None, pl.DataFrame | None]:
    """``(polars' frame or None when it raises, the scanner's frame or None when it hands the piece over)``. The
    scanner raises nothing but :class:`Unsupported` (and returns no frame) when polars raises."""
    sc = scanner()
    try:
        ref = pl.read_ndjson(io.BytesIO(text), schema=schema)
    except pl.exceptions.PolarsError:
        ref = None
    try:
        got = sc.scan(text, frame_mod._scan_kinds(schema))
    except sc.Unsupported:
        got = None
    if ref is None:
        assert got is None, "the scanner read a piece polars refuses"
    return ref, got


def assert_scans_as_polars(text: bytes, schema: dict[str, pl.DataType]) -> None:
    ref, got = scan_and_read(text, schema)
    assert ref is not None, "polars refused the piece"
    assert got is not None, "the scanner handed a valid piece over"
    assert_same_frame(ref, got)


def _pieces(text: bytes, size: int) -> list[bytes]:
    out, at = [], 0
    while at < len(text):
        end = text.find(b"\n", min(len(text), at + size))
        end = len(text) if end < 0 else end + 1
        out.append(text[at:end])
        at = end
    return out


# -- the record files we have ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("form", ["none", "float", "compact"])
def test_generated_records_scan_as_polars_reads_them(tmp_path: Path, form: str) -> None:
    gen = load_benchmark("records_gen")
    gen.generate(tmp_path, gen.GenSpec(2500, [8, 16], seed=11, chunk_times=form))
    text = (tmp_path / "records.jsonl").read_bytes()
    for schema in SCHEMAS.values():
        for piece in _pieces(text, 1 << 20):
            assert_scans_as_polars(piece, schema)


def _record_files() -> list[Path]:
    return sorted(p for p in DATA.rglob("*.jsonl*") if "record" in p.name)


@pytest.mark.parametrize("path", _record_files(), ids=lambda p: str(p.relative_to(DATA)))
def test_every_record_file_under_tests_data_scans_as_polars_reads_it(path: Path) -> None:
    text = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    for schema in SCHEMAS.values():
        for piece in _pieces(text, 1 << 20):
            assert_scans_as_polars(piece, schema)


def test_the_record_files_are_found() -> None:
    assert {p.name for p in _record_files()} >= {"records.jsonl.gz", "record-schema1.jsonl"}


def test_two_threads_scan_at_once_as_one_does() -> None:
    sc = scanner()
    lines = [json.dumps(rec(f"u{i}", i % 3, i * 0.5, 2.0 + i / 7, chunk_times=[0.1 * j for j in range(i % 50)]))
             for i in range(4000)]
    pieces = _pieces(("\n".join(lines) + "\n").encode(), 20_000)
    kinds = frame_mod._scan_kinds(SCHEMAS["all"])
    alone = [sc.scan(p, kinds) for p in pieces]
    with ThreadPoolExecutor(2) as pool:
        together = list(pool.map(lambda p: sc.scan(p, kinds), pieces))
    assert len(pieces) > 10 and all(a.equals(b) for a, b in zip(alone, together, strict=True))


# -- odd but valid JSON ----------------------------------------------------------------------------------------------

_WS = st.text(alphabet=" \t\r", max_size=2)


def _number_texts(v: float) -> list[str]:
    """Ways JSON may write ``v`` (shortest, 17 significant digits, exponent forms)."""
    return [t for t in (repr(v), f"{v:.17g}", f"{v:.17e}", f"{v:.6E}") if "inf" not in t and "nan" not in t]


_ASCII_STR = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=127), max_size=12)
_KEY = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=127, exclude_characters='"\\'),
               max_size=12).filter(lambda k: k not in RECORD_SCHEMA)  # an unknown key: a field's value is typed
_ANY_STR = st.text(max_size=12)
_FLOATS = st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from([1e-7, -0.0, 0.0, 5e3, 1e-320, 5e-324, 2.2250738585072011e-308,
                                     1.7976931348623157e308, 0.1, 1e23, 9007199254740993.0, 123.456, 1800000000.005]))


def _json_string(s: str, draw: Any) -> str:
    """``s`` as a JSON string, escaped in one of several ways per character (raw UTF-8, ``\\uXXXX`` in either case,
    surrogate pairs, ``\\/``)."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        style = draw(st.integers(0, 3))
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif o < 32:
            out.append({8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r"}.get(o, f"\\u{o:04x}"))
        elif ch == "/" and style == 0:
            out.append("\\/")
        elif style == 1 or (o > 127 and style == 2):
            if o > 0xFFFF:
                hi, lo = 0xD800 + ((o - 0x10000) >> 10), 0xDC00 + ((o - 0x10000) & 0x3FF)
                out.append(f"\\u{hi:04x}\\u{lo:04X}")
            else:
                out.append(f"\\u{o:04x}" if style == 1 else f"\\u{o:04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


@st.composite
def _value(draw: Any, dtype: pl.DataType) -> str:
    """A JSON value of ``dtype`` (or null), written oddly but validly."""
    if draw(st.integers(0, 9)) == 0:
        return "null"
    if dtype == pl.Int64:
        return str(draw(st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-5, 5))))
    if dtype == pl.Float64:
        if draw(st.booleans()):
            return str(draw(st.one_of(st.integers(-(10**15), 10**15), st.integers(-(2**63), 2**63 - 1))))
        return draw(st.sampled_from(_number_texts(draw(_FLOATS))))
    if dtype == pl.Boolean:
        return draw(st.sampled_from(["true", "false"]))
    if dtype == pl.String:
        return _json_string(draw(st.one_of(_ASCII_STR, _ANY_STR)), draw)
    if dtype == HIST_DTYPE:
        fields = [(k, draw(_value(pl.Int64() if k == "n" else pl.Float64()))) for k in ("n", "sum", "min", "max")]
        counts = draw(st.lists(st.tuples(st.integers(-50, 3000), st.integers(0, 10**6)), max_size=40,
                               unique_by=lambda t: t[0]))
        fields.append(("buckets", "{" + draw(_WS) + ",".join(f'"{k}"{draw(_WS)}:{draw(_WS)}{c}' for k, c in counts)
                       + draw(_WS) + "}"))
        fields = draw(st.permutations(fields))
        fields = fields[:draw(st.integers(0, len(fields)))]
        return "{" + ",".join(f'{draw(_WS)}"{k}"{draw(_WS)}:{draw(_WS)}{v}{draw(_WS)}' for k, v in fields) + "}"
    inner = pl.Int64() if dtype == pl.List(pl.Int64) else pl.Float64()
    items = draw(st.lists(_value(inner).filter(lambda v: v != "null"), max_size=20))
    sep = draw(st.sampled_from([",", ", ", " ,", ",\t"]))
    return "[" + draw(_WS) + sep.join(items) + draw(_WS) + "]"


_JUNK = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(10**38) + 1, 10**38 - 1), _FLOATS, _ANY_STR),
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(_ANY_STR, kids, max_size=4)),
    max_leaves=12)


@st.composite
def _line(draw: Any) -> str:
    """One record line: any subset of the record fields (values oddly written, nulls), unknown keys with any JSON
    (escaped any way), duplicate keys (the first wins in both readers), shuffled, whitespace anywhere JSON allows on
    a line. Keys are written unescaped (an escaped key is handed to polars: tested apart)."""
    names = draw(st.lists(st.sampled_from(list(RECORD_SCHEMA)), unique=True, max_size=len(RECORD_SCHEMA)))
    pairs = [(json.dumps(n), draw(_value(RECORD_SCHEMA[n]))) for n in names]
    for _ in range(draw(st.integers(0, 3))):
        junk = json.dumps(draw(_JUNK), ensure_ascii=draw(st.booleans()))
        pairs.append((f'"{draw(_KEY)}"', junk))
    if names and draw(st.booleans()):
        n = draw(st.sampled_from(names))
        pairs.append((json.dumps(n), draw(_value(RECORD_SCHEMA[n]))))
    pairs = draw(st.permutations(pairs))
    body = ",".join(f"{draw(_WS)}{k}{draw(_WS)}:{draw(_WS)}{v}{draw(_WS)}" for k, v in pairs)
    return draw(_WS) + "{" + body + draw(_WS) + "}" + draw(_WS)


@fuzz(300)
@given(st.lists(_line(), min_size=1, max_size=6), st.sampled_from(["\n", "\r\n", "\n\n", "\n \t\n"]))
@example([' {"ttft" : 1e-7 ,"e2e":-0.0,"tpot":5E+3, "step":-0,"ok":true}\t', '{}'], "\n")
@example(['{"user":"\\u00e9\\ud83d\\ude00\\/\\n", "user":5, "gap_hist":{"buckets":{}}}'], "\n")
def test_odd_but_valid_json_scans_as_polars_reads_it(lines: list[str], sep: str) -> None:
    assert_scans_as_polars((sep.join(lines) + sep).encode(), SCHEMAS["all"])


@pytest.mark.parametrize("digits", ["127605887595351923798765466791796801536",
                                    "-170141183460469231731687303715884105728",
                                    "-170141183460469231731687303715884105729", "9" * 60])
def test_an_integer_of_39_digits_or_more_is_handed_to_polars(digits: str) -> None:
    """polars reads an integer of an unknown key within i128 and refuses one outside it; the scanner does not
    decide at 39 digits or more (it hands the piece over), so ``_parse`` gives what polars gives, error included."""
    sc = scanner()
    text = b'{}\n{"x":' + digits.encode() + b',"step":3}\n'
    schema = SCHEMAS["all"]
    with pytest.raises(sc.Unsupported):
        sc.scan(text, frame_mod._scan_kinds(schema))
    try:
        ref = pl.read_ndjson(io.BytesIO(text), schema=schema)
    except pl.exceptions.PolarsError:
        with pytest.raises(pl.exceptions.PolarsError):
            frame_mod._parse(text, schema)
    else:
        assert_same_frame(ref, frame_mod._parse(text, schema))


# -- doubles bit for bit ---------------------------------------------------------------------------------------------

def _random_number_texts(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        kind = rng.randrange(5)
        if kind == 0:  # a random double, shortest repr
            out.append(repr(struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]))
        elif kind == 1:  # random digits, random exponent
            digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 25))).lstrip("0") or "0"
            point = rng.randint(0, len(digits))
            mant = digits[:point] + ("." + digits[point:] if point < len(digits) else "")
            mant = "0" + mant if mant.startswith(".") else mant
            out.append(f"{rng.choice(['', '-'])}{mant}e{rng.randint(-330, 300)}")
        elif kind == 2:  # timings as a run writes them
            out.append(repr(rng.uniform(0, 200) * 10 ** rng.randint(-6, 0)))
        elif kind == 3:  # halfway cases and near them: 17+ significant digits
            v = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(62)))[0]
            out.append(f"{v:.{rng.randint(17, 24)}e}")
        else:  # integers of up to 19 digits (Float64 columns convert them as polars does)
            out.append(str(rng.randint(-(10**rng.randint(1, 18)), 10**rng.randint(1, 18))))
    return [t for t in out if "inf" not in t and "nan" not in t]


def test_doubles_are_parsed_bit_for_bit_as_polars_parses_them() -> None:
    sc = scanner()
    rng = random.Random(20261205)
    edge = ["1e-7", "-0.0", "0.0", "-0", "5E+3", "5e-324", "4.9e-324", "2.4703282292062328e-324", "1e-400", "-1e-400",
            "2.2250738585072011e-308", "2.2250738585072014e-308", "1.7976931348623157e308", "9007199254740993",
            "-9223372036854775808", "9223372036854775807", "1e23", "8.98846567431158e307", "0.1", "0.30000000000000004",
            "1800000000.005", "123456789012345678", "1.00000000000000011102230246251565404236316680908203125",
            "7.2057594037927933e16", "1e22", "1e-22", "4503599627370496.5", "4503599627370497.5"]
    numbers = edge + _random_number_texts(rng, 20_000)
    schema = {"x": pl.Float64(), "xs": pl.List(pl.Float64)}
    kinds = frame_mod._scan_kinds(schema)
    taken = 0
    for at in range(0, len(numbers), 500):
        batch = numbers[at:at + 500]
        lines = [f'{{"x":{t},"xs":[{t},{t}]}}' for t in batch]
        try:  # one piece per number that polars refuses (out of range) or the scanner hands over
            pl.read_ndjson(io.BytesIO("\n".join(lines).encode()), schema=schema)
            sc.scan("\n".join(lines).encode(), kinds)
            pieces = ["\n".join(lines)]
        except (pl.exceptions.PolarsError, sc.Unsupported):
            pieces = lines
        for piece in pieces:
            ref, got = scan_and_read(piece.encode(), schema)
            if got is not None:
                assert ref is not None
                assert _float_bits(got["x"]) == _float_bits(ref["x"]), piece
                assert _float_bits(got["xs"]) == _float_bits(ref["xs"]), piece
                taken += got.height
    assert taken > 0.95 * len(numbers)  # handed over: only integers beyond 19 digits, and out-of-range doubles


# -- what the scanner hands over -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    b'{"step":1,"start_wall":1.0,"ok":true}\nnot json\n',  # not JSON
    b'[1, 2]\n',  # not an object
    b'{"step":1}{"step":2}\n',  # two values on a line
    b'{"step":1,\n"ok":true}\n',  # a newline inside a record: two lines
    b'{"step":"1"}\n',  # wrong type
    b'{"step":1.5}\n',
    b'{"ok":1}\n',
    b'{"e2e":true}\n',
    b'{"user":5}\n',  # polars writes a number in a String column as its text: handed over
    b'{"gap_hist":[1]}\n',
    b'{"chunk_times":3}\n',
    b'{"chunk_tokens":[1, null]}\n',
    b'{"chunk_tokens":[1.5]}\n',
    b'{"step":9223372036854775808}\n',  # out of Int64
    b'{"e2e":1e400}\n',  # out of range: polars refuses
    b'{"x":1e400}\n',  # even when skipped
    b'{"x":01}\n', b'{"x":1.}\n', b'{"x":.5}\n', b'{"x":+1}\n', b'{"x":NaN}\n', b'{"x":[1,]}\n', b'{"x":{"a":1,}}\n',
    b'{"x":"a\tb"}\n', b'{"x":"\\x"}\n', b'{"x":"\\u12"}\n', b'{"x":"\\udc00"}\n', b'{"x":"\\ud800"}\n',
    b'{"x":"\xff"}\n', b'{"x":"\xed\xa0\x80"}\n', b'{"x":"\xc0\x80"}\n', b'{"x":tru}\n', b'{"x":[1 2]}\n',
    b'{"x":' + b"[" * 70 + b"]" * 70 + b"}\n",  # deeper than the scanner's skip goes
    b'{"\\u0073tep":1}\n',  # an escaped key
    b'{"gap_hist":{"buckets":{"1":1.5}}}\n',  # buckets polars writes back its own way
    b'{"gap_hist":{"buckets":{"\\n":1}}}\n',
    b'{"gap_hist":{"buckets":{"1":-0}}}\n',
    b'{"gap_hist":{"buckets":[1]}}\n',
    b'{"x":1} \x0c\n',
    b'\xef\xbb\xbf{"step":1}\n',  # a byte-order mark
    b'{"step":1,"step":2,"ok":true,"e2e":1e999}\n',
    b'{"step":1',  # torn
])
def test_what_the_scanner_does_not_read_exactly_goes_to_polars(text: bytes) -> None:
    sc = scanner()
    with pytest.raises(sc.Unsupported):
        sc.scan(text, frame_mod._scan_kinds(SCHEMAS["all"]))


@pytest.mark.parametrize("text", [
    b'{"step":1,"step":"x","ok":true,"ok":3}\n',  # the first of duplicate keys wins, the later are not read
    b'{"gap_hist":{"n":1,"n":"x","buckets":{"1":2,"1":3}},"gap_hist":5}\n',
    b'{"gap_hist":{}}\n{"gap_hist":null}\n{}\n\n \t\r\n',
    b'{"gap_hist":{"buckets":"text","q":[{"a":null}]}}\n',
    b'{"gap_hist":{"buckets":{"-3":7, "a b":1, "<":2, "\x7f":3}}}\n',
    b'{"gap_hist":{"buckets":{"1":123456789012345678}}}\n',
    b'{"user":"\\u0000\\u00e9\\ud83d\\ude00\xc3\xa9"}\r\n',
    b'{"e2e":-0,"ttft":-0.0,"tpot":1E5,"connect":12,"t_headers":-9223372036854775808}\n',
    b'{"chunk_times":[],"chunk_tokens":[]}\n{"chunk_times":[ 1 , 2.5 ,-0, -0.0 ,1e-7],"chunk_tokens":[-0, 3]}\n',
    b'{"x":123456789012345678901234567890,"y":1e-400,"z":"\\ud800\\udc00"}\n',
    b'',
    b'\n\n',
    b'{"step":1}',  # no newline at the end
])
def test_edge_cases_scan_as_polars_reads_them(text: bytes) -> None:
    assert_scans_as_polars(text, SCHEMAS["all"])


def test_a_bucket_object_of_more_than_32_keys_reads_as_the_same_object() -> None:
    """polars writes such an object back in its hash map's order; the scanner keeps the written one (the report
    counts buckets by key, harness.report.columns.gap_histogram)."""
    sc = scanner()
    counts = {str(900 + i): i + 1 for i in range(40)}
    line = json.dumps({"gap_hist": {"n": 1, "buckets": counts}}).encode() + b"\n"
    got = sc.scan(line, frame_mod._scan_kinds({"gap_hist": HIST_DTYPE}))
    assert got["gap_hist"].struct.field("buckets")[0] == json.dumps(counts)
    assert_scans_as_polars(line, {"gap_hist": HIST_DTYPE})


# -- the switch and the readers ----------------------------------------------------------------------------------------

def test_the_scanner_is_built_where_ci_requires_it() -> None:
    scanner()  # fails under LLMLOAD_REQUIRE_NATIVE=1 when harness/_fastrecords.pyx was not built


def test_pure_python_forces_polars(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    sc = scanner()
    calls: list[int] = []

    class Spy:
        Unsupported = sc.Unsupported
        KINDS = sc.KINDS

        @staticmethod
        def scan(text: bytes, kinds: Any) -> pl.DataFrame:
            calls.append(len(text))
            return sc.scan(text, kinds)

    monkeypatch.setattr(frame_mod, "_SCANNER", Spy)
    run = tmp_path / "run"
    run.mkdir()
    (run / "records.jsonl").write_text("".join(json.dumps(rec(f"u{i}", 1, i, 2.0)) + "\n" for i in range(50)))
    monkeypatch.setenv(PURE_ENV, "1")
    assert not frame_mod.scanner_active()
    pure = read_frame(run, sidecar=False)
    assert calls == []
    monkeypatch.setenv(PURE_ENV, "0")
    assert frame_mod.scanner_active()
    native = read_frame(run, sidecar=False)
    assert calls and native.equals(pure) and pure.height == 50


def _outcome(run: Path, **kw: Any) -> tuple[str, Any]:
    try:
        return "ok", read_frame(run, sidecar=False, **kw)
    except (ValueError, KeyError) as e:
        return "error", str(e)


@pytest.mark.parametrize("body", [
    '{"step":1,"start_wall":1.0,"ok":true}\n{"step":1,"start_wall":2.0,"ok":tru}\n{"step":1,"start_wall":3.0,"ok":true}\n',
    '{"step":1,"start_wall":1.0,"ok":true}\n{"step":1,"start_wall":"x","ok":true}\n',
    '{"step":1,"start_wall":1.0,"ok":true}\n[1,2]\n{"step":1,"start_wall":3.0,"ok":true}\n',
    '{"step":1,"start_wall":1.0,"ok":true}\n{"user":"x","ok":true}\n',
    '{"step":1,"start_wall":1.0,"ok":true}\n{"step":null,"start_wall":2.0,"ok":null}\n',
    '{"step":1,"start_wall":1.0,"ok":true}\n{"step":1,"start_wall":2.0,"ok":true,"schema":99}\n',
    '{"step":1,"start_wall":1.0,"ok":true}\n{"step":1,"start_wall":2.0,"ok":true,"chunk_times":[1,',
    '{"step":1,"start_wall":1.0,"ok":true}\nnot json\n',
    '{"step":1,"start_wall":1.0,"ok":true,"e2e":1e400}\n',
    '{"step":1,"start_wall":1.0,"ok":true,"user":7}\n',
])
def test_read_frame_gives_the_same_frame_or_error_with_and_without_the_scanner(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, body: str) -> None:
    scanner()
    run = tmp_path / "run"
    run.mkdir()
    (run / "records.jsonl").write_text(body)
    monkeypatch.setenv(PURE_ENV, "1")
    pure = _outcome(run)
    pure_all = _outcome(run, columns=tuple(RECORD_SCHEMA))
    monkeypatch.setenv(PURE_ENV, "0")
    native = _outcome(run)
    native_all = _outcome(run, columns=tuple(RECORD_SCHEMA))
    for a, b in ((pure, native), (pure_all, native_all)):
        assert a[0] == b[0]
        assert a[1] == b[1] if a[0] == "error" else a[1].equals(b[1])


def test_the_report_is_byte_identical_with_and_without_the_scanner(tmp_path: Path) -> None:
    scanner()
    gen = load_benchmark("records_gen")
    run = tmp_path / "run"
    gen.generate(run, gen.GenSpec(3000, [8, 16], seed=4, chunk_times="compact"))
    made = {p.name for p in run.iterdir()}
    outs = []
    for pure in ("1", "0"):
        for p in list(run.iterdir()):  # each report from the run as generated: no parts, sidecar or report
            if p.name not in made:
                shutil.rmtree(p) if p.is_dir() else p.unlink()
        env = {**os.environ, PURE_ENV: pure, "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, "-m", "harness.report", str(run), "--quiet"], env=env, check=True,
                       timeout=300, cwd=ROOT)
        outs.append((run / "report.json").read_bytes())
    assert outs[0] == outs[1]
    assert json.loads(outs[0])["steps"] and not math.isnan(len(outs[0]))
