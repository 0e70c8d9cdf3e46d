"""A stand-in for transformers' GPT-2 as bench/contention.py's jobs use it (see
../torch/__init__.py): generate() puts the prompt and then each new token into the streamer,
3 ms of host work and 0.2 ms on the GPU queue a token; a training forward is 15 ms on it."""
import time

import torch


class GPT2Config:
    def __init__(self, n_embd=768, n_layer=12, n_head=12, **kw):
        self.n_embd, self.n_layer, self.n_head = n_embd, n_layer, n_head
        self.vocab_size, self.eos_token_id = 50257, 50256


class _Out:
    def __init__(self, loss):
        self.loss = loss


class GPT2LMHeadModel:
    def __init__(self, config):
        self.config = config

    def to(self, *a, **k):
        return self

    def eval(self):
        return self

    def train(self):
        return self

    def parameters(self):
        return iter([torch.Tensor((1,))])

    def __call__(self, input_ids=None, labels=None):
        torch._enqueue(0.015)
        return _Out(torch.Tensor(()))

    def generate(self, input_ids, attention_mask=None, do_sample=True, max_new_tokens=20,
                 min_new_tokens=0, pad_token_id=None, streamer=None):
        assert not do_sample and attention_mask is not None and pad_token_id is not None
        if streamer is not None:
            streamer.put(input_ids)
        for _ in range(max_new_tokens):
            t = time.monotonic() + 0.003
            while time.monotonic() < t:
                pass
            torch._enqueue(0.0002)
            torch.cuda.synchronize()  # generate's .cpu() of the new token
            if streamer is not None:
                streamer.put(None)
        if streamer is not None:
            streamer.end()
        return torch.Tensor((input_ids.shape[0], input_ids.shape[1] + max_new_tokens))
