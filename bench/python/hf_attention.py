#!/usr/bin/env python3
"""Tokens per second of a transformers Llama with attn_implementation="grape" against transformers' own
attention ("sdpa" where torch has it, else "eager"), prefill and generate(), in one process (not part of
the test suite; docs/python.md, "Hugging Face models", has the figures).

The model: a Llama from a config (random weights, nothing downloaded), float32, 4 layers, hidden 512,
8 query heads on 2 KV heads of 64, vocabulary 1000. Prefill: one forward of a batch of 2 prompts of
T tokens (tokens/s counts the real tokens). Generate: greedy, the same batch, N + 1 new tokens
through the KV cache, timed from the first new token to the last by a stopping criterion that notes
the time of each step, so the prompt's forward is not counted (tokens/s counts the 2·N new tokens).
Each case runs with the first prompt left-padded by T/4 and without padding. Each round times every
(implementation, case) once in alternating order; the figure is the median over rounds.

--threads sets torch's thread count, which grape.hf's calls follow, and OMP_NUM_THREADS before torch
and grape load (a PyPI torch brings an OpenMP runtime of its own, apart from grape's). --general-path
also times grape with its decode steps on the general path (the fused kernel on the cache copied and
packed at every step, as before the decode path), the same steps in the same rounds.

Usage: hf_attention.py [--tokens 512,2048] [--new 64] [--rounds 5] [--threads 2] [--general-path]
"""
import argparse
import os
import statistics
import time


def allow_generate_without_fsdp(torch, transformers):
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
    parser.add_argument("--general-path", action="store_true")
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch
    import transformers

    import grape.hf

    allow_generate_without_fsdp(torch, transformers)
    torch.set_num_threads(args.threads)
    reference = "sdpa" if hasattr(torch.nn.functional, "scaled_dot_product_attention") else "eager"
    config = transformers.LlamaConfig(vocab_size=1000, hidden_size=512, intermediate_size=1024, num_hidden_layers=4,
                                      num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=8192)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {args.threads} threads, "
          f"reference {reference!r}")

    def batch(tokens, padded):
        ids = torch.randint(1, 1000, (2, tokens))
        mask = torch.ones_like(ids)
        if padded:
            ids[0, :tokens // 4], mask[0, :tokens // 4] = 0, 0
        return ids, mask

    def prefill(ids, mask):
        start = time.perf_counter()
        with torch.no_grad():
            model(input_ids=ids, attention_mask=mask)
        return int(mask.sum()) / (time.perf_counter() - start)

    class StepTimes(transformers.StoppingCriteria):
        """Notes when each new token is there; stops nothing."""
        def __init__(self):
            self.times = []

        def __call__(self, input_ids, scores, **kwargs):
            self.times.append(time.perf_counter())
            return torch.zeros(input_ids.shape[0], dtype=torch.bool)

    def generate(ids, mask):
        steps = StepTimes()
        model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=args.new + 1,
                       min_new_tokens=args.new + 1, do_sample=False, pad_token_id=0,
                       stopping_criteria=transformers.StoppingCriteriaList([steps]))
        return 2 * args.new / (steps.times[-1] - steps.times[0])

    cases = []
    for tokens in (int(t) for t in args.tokens.split(",")):
        for padded in (True, False):
            what = "left-padded" if padded else "no padding"
            ids, mask = batch(tokens, padded)
            cases.append((f"prefill T={tokens}, {what}", prefill, ids, mask))
            cases.append((f"generate {args.new} steps after T={tokens}, {what}", generate, ids, mask))

    decode_step = grape.hf._decode_step
    general = "grape, general path"
    impls = ["grape", reference] + ([general] if args.general_path else [])
    rates = {(name, impl): [] for name, *_ in cases for impl in impls}
    for r in range(args.rounds):
        for name, run, ids, mask in cases:
            order = [i for i in impls if i != general] if name.startswith("prefill") else impls
            for impl in (order if r % 2 == 0 else order[::-1]):
                grape.hf._decode_step = decode_step if impl != general else (lambda *step: None)
                grape.hf.set_attention(model, "grape" if impl.startswith("grape") else impl)
                rates[(name, impl)].append(run(ids, mask))
    grape.hf._decode_step = decode_step
    for name, *_ in cases:
        g = statistics.median(rates[(name, "grape")])
        t = statistics.median(rates[(name, reference)])
        line = f"{name}: grape {g:.0f} tokens/s, {reference} {t:.0f} tokens/s, ratio {g / t:.2f}"
        if general in impls and rates[(name, general)]:  # prefill does not run it
            p = statistics.median(rates[(name, general)])
            line += f"; general path {p:.0f} tokens/s, ratio {p / t:.2f}"
        print(line)


if __name__ == "__main__":
    main()
