"""Build a tiny *scripted* Qwen3 model and tokenizer for testing against a real vLLM server.

Run with the vLLM venv's python (it needs ``torch``, ``tokenizers`` and ``transformers``)::

    .venv-vllm/bin/python tests/real_vllm/build_model.py OUT_DIR --reasoning K --answer M

No network access is needed. The result, in ``OUT_DIR``:

* a byte-level BPE tokenizer (vocabulary 2,048 entries) trained on the Python standard library's
  sources, with special tokens ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>`` and the added tokens
  ``<think>``, ``</think>``, wrapped in ``PreTrainedTokenizerFast`` with a Qwen-style chat template whose
  generation prompt ends in ``<|im_start|>assistant\\n<think>\\n`` (with ``chat_template_kwargs``
  ``enable_thinking: false``, as in Qwen3's template, the think block is closed in the prompt:
  ``...<think>\\n</think>``). As in Qwen3 and DeepSeek-R1, the think tags
  are atomic added tokens but *not* special: vLLM detokenizes with ``skip_special_tokens=True`` and its
  ``deepseek_r1`` reasoning parser looks for the text ``</think>`` in a delta, so a special ``</think>``
  corrupts the text whenever vLLM coalesces ``</think>`` with neighbouring tokens into one delta (seen:
  the last reasoning character lost, junk at the start of the answer);
* a ``Qwen3ForCausalLM`` (hidden size 128, 1 layer, 2 heads of dimension 64) whose weights are *scripted*:
  every layer's ``o_proj`` and ``down_proj`` are zero, so the final hidden state is (the RMS-normalised)
  embedding of the current token; ``lm_head`` is untied, all its rows are zero except, for the chain
  ``p0 -> r1 ... rK -> </think> -> a1 ... aM -> <|im_end|>`` (``p0`` is the last prompt token, the newline
  after ``<think>``), the row of each next token, which is 40 x the embedding of the current token. Whatever
  the prompt, a chat request therefore generates exactly K reasoning tokens, ``</think>``, M answer tokens
  and the EOS token ``<|im_end|>``, effectively deterministically even when sampling at temperature 1. With
  thinking off the prompt ends in ``</think>`` instead, so the chain starts there: M answer tokens and EOS, no
  reasoning (and vLLM's reasoning parser, seeing ``</think>`` after the last ``<think>`` of the prompt, streams
  them as content);
* ``script.json``: K, M, the token ids and the expected texts (see :func:`build`).

The build is seeded and deterministic for a given Python standard library; it is skipped when
``OUT_DIR/script.json`` already records the same K, M and builder version.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import shutil
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

#: Bump when the construction changes, so cached models are rebuilt.
BUILDER_VERSION = 4
SEED = 1234
VOCAB_SIZE = 2048
HIDDEN_SIZE = 128
NUM_LAYERS = 1
NUM_HEADS = 2
HEAD_DIM = 64  # the CPU attention kernel rejects head_dim=16
INTERMEDIATE_SIZE = 256
MAX_POSITIONS = 4096
LOGIT_SCALE = 40.0
#: Upper bound on the characters of training text (bytes of ASCII-ish source), for speed.
MAX_TRAIN_CHARS = 6_000_000

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
THINK = "<think>"
END_THINK = "</think>"
ENDOFTEXT = "<|endoftext|>"
#: Special tokens (ids 0, 1, 2); skipped when vLLM detokenizes.
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END]
#: Added, non-special tokens (the last two ids): kept in detokenized text, as in Qwen3.
THINK_TOKENS = [THINK, END_THINK]

GENERATION_PROMPT = f"{IM_START}assistant\n{THINK}\n"
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['content'] is string %}{%- set text = message['content'] %}"
    "{%- else %}{%- set text = message['content'] | map(attribute='text') | join('') %}{%- endif %}"
    "{{- '" + IM_START + "' + message['role'] + '\\n' + text + '" + IM_END + "' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '" + IM_START + "assistant\\n" + THINK + "\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '" + END_THINK + "' }}{%- endif %}"
    "{%- endif %}"
)

#: Chain tokens: a leading space and 2+ lower-case letters (preferred), or any plain ASCII word.
_PREFERRED = re.compile(r"^ [a-z]{2,}$")
_ACCEPTABLE = re.compile(r"^ ?[A-Za-z0-9_]+$")


def training_files() -> list[Path]:
    """Return the (sorted) Python standard library source files used to train the tokenizer."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.glob("*.py") if p.is_file())
    if not files:
        raise SystemExit(f"no training text found under {stdlib}")
    return files


def training_text() -> list[str]:
    """Return the training corpus: stdlib sources, capped at :data:`MAX_TRAIN_CHARS` characters."""
    texts: list[str] = []
    total = 0
    for path in training_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        texts.append(text)
        total += len(text)
        if total >= MAX_TRAIN_CHARS:
            break
    return texts


def build_tokenizer() -> Any:
    """Train the byte-level BPE and wrap it in a ``PreTrainedTokenizerFast`` with the chat template."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE - len(THINK_TOKENS),
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(training_text(), trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in THINK_TOKENS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        unk_token=None,
        bos_token=None,
        additional_special_tokens=[IM_START, IM_END],
        clean_up_tokenization_spaces=False,
        model_max_length=MAX_POSITIONS,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def choose_chain(tokenizer: Any, p0: int, k: int, m: int) -> tuple[list[int], list[int]]:
    """Pick K reasoning and M answer token ids: distinct, not special, decoding to one line of ASCII.

    Candidates are ``" word"`` tokens first, then other plain ASCII tokens, shuffled with a fixed seed.
    Each chosen id must round-trip (``encode(decode(id)) == [id]``) so the texts are unambiguous.
    """
    special_ids = set(tokenizer.all_special_ids)
    preferred: list[int] = []
    acceptable: list[int] = []
    for tid in range(len(tokenizer)):
        if tid in special_ids or tid == p0:
            continue
        text = tokenizer.decode([tid], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if "\n" in text or "\r" in text or "<" in text:
            continue
        if tokenizer.encode(text, add_special_tokens=False) != [tid]:
            continue
        if _PREFERRED.match(text):
            preferred.append(tid)
        elif _ACCEPTABLE.match(text):
            acceptable.append(tid)
    rng = random.Random(SEED)
    rng.shuffle(preferred)
    rng.shuffle(acceptable)
    pool = preferred + acceptable
    if k + m > len(pool):
        raise SystemExit(f"K + M = {k + m} exceeds the {len(pool)} usable distinct chain tokens")
    return pool[:k], pool[k : k + m]


def build_model(vocab_size: int, chain: list[int], eos_id: int, pad_id: int) -> Any:
    """Return the scripted ``Qwen3ForCausalLM`` whose greedy (and sampled) output follows ``chain``.

    ``chain[0]`` is the prompt's last token; each ``chain[i + 1]`` gets the lm_head row
    ``LOGIT_SCALE * embedding[chain[i]]``.
    """
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(SEED)
    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=NUM_LAYERS,
        num_attention_heads=NUM_HEADS,
        num_key_value_heads=NUM_HEADS,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        dtype="bfloat16",
    )
    model = Qwen3ForCausalLM(config)
    with torch.no_grad():
        emb = model.model.embed_tokens.weight
        emb.normal_(mean=0.0, std=0.02)
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.norm.weight.fill_(1.0)
        head = model.lm_head.weight
        head.zero_()
        for cur, nxt in itertools.pairwise(chain):
            head[nxt] = LOGIT_SCALE * emb[cur]
    model.generation_config.eos_token_id = eos_id
    model.generation_config.pad_token_id = pad_id
    model.generation_config.bos_token_id = None
    return model


def check_chain(model: Any, chain: list[int]) -> float:
    """Check in bfloat16 that each chain token's argmax successor is the next one; return the min margin.

    The margin is ``logit[next] - max(other logits)`` (logit units), over all chain steps.
    """
    import torch

    m16 = model.to(torch.bfloat16).eval()
    ids = torch.tensor([chain[:-1]])
    with torch.no_grad():
        logits = m16(input_ids=ids).logits[0].float()
    targets = torch.tensor(chain[1:])
    target_logits = logits[torch.arange(len(targets)), targets]
    others = logits.clone()
    others[torch.arange(len(targets)), targets] = float("-inf")
    margins = target_logits - others.max(dim=-1).values
    bad = (margins <= 0).nonzero().flatten().tolist()
    if bad:
        raise SystemExit(f"scripted chain is not followed at steps {bad}")
    return float(margins.min())


def build(out_dir: Path, k: int, m: int) -> dict[str, Any]:
    """Build the tokenizer, model and ``script.json`` in ``out_dir``; return the script record.

    The record's keys: ``builder_version``, ``reasoning_tokens`` (K), ``answer_tokens`` (M),
    ``expected_reasoning`` / ``expected_answer`` (the texts the server streams), ``reasoning_pieces`` /
    ``answer_pieces`` (the text of each token, in order), ``reasoning_ids``,
    ``answer_ids``, ``p0_id``, ``end_think_id``, ``eos_id``, ``expected_completion_tokens`` (K + M + 2:
    ``</think>`` and EOS are generated tokens too), ``expected_completion_tokens_thinking_off`` (M + 1: the
    answer and EOS), ``min_margin_logits`` and ``build_seconds``.
    """
    t0 = time.monotonic()
    tokenizer = build_tokenizer()
    prompt_ids: list[int] = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hello"}], add_generation_prompt=True, tokenize=True, return_dict=False
    )
    if not isinstance(prompt_ids, list) or not prompt_ids or not isinstance(prompt_ids[0], int):
        raise SystemExit(f"unexpected chat template output: {prompt_ids!r}")
    p0 = prompt_ids[-1]
    if tokenizer.decode([p0]) != "\n":
        raise SystemExit(f"last prompt token {p0} is {tokenizer.decode([p0])!r}, expected a newline")
    end_think = tokenizer.convert_tokens_to_ids(END_THINK)
    off_ids: list[int] = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hello"}], add_generation_prompt=True, tokenize=True, return_dict=False,
        enable_thinking=False,
    )
    if off_ids != [*prompt_ids, end_think]:
        raise SystemExit(f"enable_thinking=False must append {END_THINK} to the prompt, got {off_ids!r}")
    if tokenizer.decode([end_think], skip_special_tokens=True) != END_THINK:
        raise SystemExit(f"{END_THINK} must survive skip_special_tokens (an added, non-special token)")
    if tokenizer.encode(f"x{THINK}y{END_THINK}z", add_special_tokens=False).count(end_think) != 1:
        raise SystemExit(f"{END_THINK} is not encoded as one token")
    eos = tokenizer.convert_tokens_to_ids(IM_END)
    pad = tokenizer.convert_tokens_to_ids(ENDOFTEXT)
    reasoning_ids, answer_ids = choose_chain(tokenizer, p0, k, m)
    chain = [p0, *reasoning_ids, end_think, *answer_ids, eos]

    model = build_model(len(tokenizer), chain, eos, pad)
    margin = check_chain(model, chain)

    # Write into a private sibling directory, then rename it into place, so that a concurrent build or a
    # server reading the cache never sees a half-written model.
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp_dir, ignore_errors=True)
    tmp_dir.mkdir()
    tokenizer.save_pretrained(tmp_dir)
    model.save_pretrained(tmp_dir)
    record: dict[str, Any] = {
        "builder_version": BUILDER_VERSION,
        "reasoning_tokens": k,
        "answer_tokens": m,
        "expected_reasoning": "".join(tokenizer.decode([t]) for t in reasoning_ids),
        "expected_answer": "".join(tokenizer.decode([t]) for t in answer_ids),
        "reasoning_pieces": [tokenizer.decode([t]) for t in reasoning_ids],
        "answer_pieces": [tokenizer.decode([t]) for t in answer_ids],
        "reasoning_ids": reasoning_ids,
        "answer_ids": answer_ids,
        "p0_id": p0,
        "end_think_id": end_think,
        "eos_id": eos,
        "vocab_size": len(tokenizer),
        "expected_completion_tokens": k + m + 2,
        "expected_completion_tokens_thinking_off": m + 1,
        "min_margin_logits": round(margin, 3),
        "build_seconds": round(time.monotonic() - t0, 3),
    }
    (tmp_dir / "script.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    if out_dir.exists():
        shutil.rmtree(out_dir, ignore_errors=True)
    try:
        os.replace(tmp_dir, out_dir)
    except OSError:
        # Another process finished the same build first: keep its result if it is complete.
        shutil.rmtree(tmp_dir, ignore_errors=True)
        other = cached(out_dir, k, m)
        if other is None:
            raise
        return other
    return record


def cached(out_dir: Path, k: int, m: int) -> dict[str, Any] | None:
    """Return the existing script record if ``out_dir`` already holds a build for (K, M), else None."""
    path = out_dir / "script.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (
        isinstance(record, dict)
        and record.get("builder_version") == BUILDER_VERSION
        and record.get("reasoning_tokens") == k
        and record.get("answer_tokens") == m
        and (out_dir / "config.json").is_file()
    ):
        return record
    return None


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; prints the script record as JSON on stdout."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--reasoning", type=int, required=True, help="K: reasoning tokens per reply")
    parser.add_argument("--answer", type=int, required=True, help="M: answer tokens per reply")
    parser.add_argument("--force", action="store_true", help="rebuild even if cached")
    args = parser.parse_args(argv)
    if args.reasoning < 1 or args.answer < 1:
        parser.error("--reasoning and --answer must be >= 1")
    record = None if args.force else cached(args.out_dir, args.reasoning, args.answer)
    if record is not None:
        print(f"build_model: cached build in {args.out_dir}", file=sys.stderr)
    else:
        record = build(args.out_dir, args.reasoning, args.answer)
        print(f"build_model: built {args.out_dir} in {record['build_seconds']} s", file=sys.stderr)
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
