#!/usr/bin/env python3
"""Tokens per second of a transformers Llama with attn_implementation="grape" against transformers' own
attention ("sdpa" where torch has it, else "eager"), prefill and generate(), in one process (not part of
the test suite; docs/python.md, "Hugging Face models", has the figures).

The model: a Llama from a config (random weights, nothing downloaded), float32, 4 layers, hidden 512,
8 query heads on 2 KV heads of 64, vocabulary 1000. Prefill: one forward of a batch of 2 prompts of
T tokens, the first left-padded by T/4 (tokens/s counts the real tokens); generate: greedy, the same
batch, N new tokens through the KV cache (tokens/s counts the 2·N new ones). Each round times every
(implementation, case) once in alternating order; the figure is the median over rounds.

Usage: hf_attention.py [--tokens 512,2048] [--new 64] [--rounds 5] [--threads 2]
"""
import argparse
import statistics
import time

import torch
import transformers

import grape
import grape.hf


def allow_generate_without_fsdp():
    """Debian's torch 1.13 cannot import torch.distributed.fsdp under Python 3.11, which generate() asks."""
    try:
        import torch.distributed.fsdp  # noqa: F401
    except Exception:
        import transformers.generation.utils as generation
        generation.is_fsdp_managed_module = lambda module: False


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", default="512,2048")
    parser.add_argument("--new", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    allow_generate_without_fsdp()
    torch.set_num_threads(args.threads)
    reference = "sdpa" if hasattr(torch.nn.functional, "scaled_dot_product_attention") else "eager"
    config = transformers.LlamaConfig(vocab_size=1000, hidden_size=512, intermediate_size=1024, num_hidden_layers=4,
                                      num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=8192)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {args.threads} threads, "
          f"reference {reference!r}")

    def batch(tokens):
        ids = torch.randint(1, 1000, (2, tokens))
        mask = torch.ones_like(ids)
        ids[0, :tokens // 4], mask[0, :tokens // 4] = 0, 0
        return ids, mask

    def prefill(ids, mask):
        with torch.no_grad():
            model(input_ids=ids, attention_mask=mask)
        return int(mask.sum())

    def generate(ids, mask):
        model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=args.new, min_new_tokens=args.new,
                       do_sample=False, pad_token_id=0)
        return 2 * args.new

    cases = []
    for tokens in (int(t) for t in args.tokens.split(",")):
        ids, mask = batch(tokens)
        cases.append((f"prefill T={tokens}", prefill, ids, mask))
    ids, mask = batch(int(args.tokens.split(",")[0]))
    cases.append((f"generate {args.new} new after T={ids.shape[1]}", generate, ids, mask))

    rates = {(name, impl): [] for name, *_ in cases for impl in ("grape", reference)}
    for r in range(args.rounds):
        for name, run, ids, mask in cases:
            for impl in (("grape", reference) if r % 2 == 0 else (reference, "grape")):
                grape.hf.set_attention(model, impl)
                start = time.perf_counter()
                count = run(ids, mask)
                rates[(name, impl)].append(count / (time.perf_counter() - start))
    for name, *_ in cases:
        g = statistics.median(rates[(name, "grape")])
        t = statistics.median(rates[(name, reference)])
        print(f"{name}: grape {g:.0f} tokens/s, {reference} {t:.0f} tokens/s, ratio {g / t:.2f}")


if __name__ == "__main__":
    main()
