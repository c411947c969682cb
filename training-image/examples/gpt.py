"""A GPT-style decoder-only transformer on synthetic token sequences: a big state to checkpoint.

    python -m elastic_trainer.launcher --nnodes=1:4 --nproc_per_node=1 \\
        examples/gpt.py --size=368m --checkpoint-dir=/mnt/shared/output/gpt \\
        --total-steps=10000 --global-batch-size=16

Built from torch.nn only (no download, no tokenizer): token and position embeddings, pre-norm
blocks of causal self-attention (``scaled_dot_product_attention``: flash attention on GPUs that
have it) and an MLP, an untied output head. ``--size=368m`` is the model of README.md's GPU
figures (368M parameters: with AdamW's two moments a 4.4 GB fp32 state, the checkpoint that
blocked 10.3 s per save on an H100); ``tiny`` runs on a CPU in seconds. AdamW is the fused CUDA
kernel on GPUs. The data are sequences ``start, start + stride, ...`` modulo the vocabulary,
made from the seed in every process: learnable, so the loss falls, and no dataset is needed.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass

import torch
from elastic_trainer.precision import Precision
from elastic_trainer.trainer import TrainConfig, train
from torch import nn
from torch.utils.data import Dataset, TensorDataset


@dataclass(frozen=True)
class GPTSize:
    vocab: int
    context: int
    width: int
    layers: int
    heads: int

    def parameters(self) -> int:
        """What ``GPT(self)`` holds (weights and biases), without building it."""
        block = 12 * self.width**2 + 13 * self.width  # qkv, projection, 4x MLP, two layer norms
        embeddings = 2 * self.vocab * self.width + self.context * self.width  # tokens, head, positions
        return self.layers * block + embeddings + 2 * self.width


SIZES: dict[str, GPTSize] = {
    "tiny": GPTSize(vocab=128, context=32, width=64, layers=2, heads=2),
    # GPT-2 medium's shape (24 x 1024, 16 heads) with a 32k vocabulary and an untied head: 368.4M
    "368m": GPTSize(vocab=32000, context=512, width=1024, layers=24, heads=16),
}


class Block(nn.Module):
    def __init__(self, size: GPTSize, dropout: float) -> None:
        super().__init__()
        self.heads, self.dropout = size.heads, dropout
        self.norm1 = nn.LayerNorm(size.width)
        self.qkv = nn.Linear(size.width, 3 * size.width)
        self.proj = nn.Linear(size.width, size.width)
        self.norm2 = nn.LayerNorm(size.width)
        self.mlp = nn.Sequential(nn.Linear(size.width, 4 * size.width), nn.GELU(),
                                 nn.Linear(4 * size.width, size.width), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        attended = nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, length, width))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    def __init__(self, size: GPTSize, dropout: float = 0.0) -> None:
        super().__init__()
        self.tokens = nn.Embedding(size.vocab, size.width)
        self.positions = nn.Embedding(size.context, size.width)
        self.blocks = nn.Sequential(*(Block(size, dropout) for _ in range(size.layers)))
        self.norm = nn.LayerNorm(size.width)
        self.head = nn.Linear(size.width, size.vocab, bias=False)
        for name, param in self.named_parameters():
            if name.endswith("weight") and param.dim() == 2:
                # GPT-2's init; residual projections scaled down with depth
                std = 0.02 / math.sqrt(2 * size.layers) if name.endswith(("proj.weight", "mlp.2.weight")) else 0.02
                nn.init.normal_(param, std=std)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        return self.head(self.norm(self.blocks(self.tokens(tokens) + self.positions(positions))))


def sequences(count: int, size: GPTSize, seed: int) -> Dataset:
    """``count`` sequences of context + 1 tokens (inputs and next-token targets)."""
    generator = torch.Generator().manual_seed(seed + 777)
    start = torch.randint(0, size.vocab, (count, 1), generator=generator)
    stride = torch.randint(1, 8, (count, 1), generator=generator)
    return TensorDataset((start + stride * torch.arange(size.context + 1)) % size.vocab)


class GPTTask:
    def __init__(self, size: GPTSize, samples: int, seed: int, lr: float, weight_decay: float,
                 dropout: float = 0.0, precision: str = "auto") -> None:
        self.size, self.lr, self.weight_decay, self.dropout = size, lr, weight_decay, dropout
        self.dataset = sequences(samples, size, seed)
        self._precision = precision
        self.precision: Precision | None = None  # resolved in build_model, after the CUDA device is set

    def build_model(self) -> nn.Module:
        self.precision = Precision.resolve(self._precision, channels_last=False)
        return GPT(self.size, self.dropout)

    def build_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        # the trainer moves the model before this: fused needs the parameters on the GPU already
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        fused = next(model.parameters()).is_cuda
        return torch.optim.AdamW([{"params": decay, "weight_decay": self.weight_decay},
                                  {"params": no_decay, "weight_decay": 0.0}],
                                 lr=self.lr, betas=(0.9, 0.95), fused=fused)

    def build_scheduler(self, optimizer: torch.optim.Optimizer, total_steps: int):
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(total_steps, 1))

    def loss_sum(self, model: nn.Module, batch, device: torch.device) -> torch.Tensor:
        precision = self.precision or Precision.resolve(self._precision, channels_last=False)
        (tokens,) = batch
        tokens = tokens.to(device, non_blocking=True)
        with precision.autocast(device):
            logits = model(tokens[:, :-1])
        # a sample's loss is its mean over tokens; summed over samples in fp32 (the trainer divides
        # by the global batch)
        losses = nn.functional.cross_entropy(logits.float().flatten(0, 1), tokens[:, 1:].flatten(), reduction="sum")
        return losses / self.size.context


def task_and_config(argv: list[str] | None = None) -> tuple[GPTTask, TrainConfig]:
    """The task and the trainer's settings from the command line (bench/gpu.py's bare loop uses it too)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    TrainConfig.add_arguments(parser)
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--samples", type=int, default=4096, help="synthetic sequences in memory")
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--dropout", type=float, default=0.0)
    Precision.add_arguments(parser, channels_last=False)
    args = parser.parse_args(argv)
    if args.samples < 1:
        parser.error(f"--samples={args.samples}: must be at least 1")
    if not 0.0 <= args.dropout < 1.0:
        parser.error(f"--dropout={args.dropout}: must be in [0, 1)")
    task = GPTTask(SIZES[args.size], args.samples, args.seed, args.lr, args.weight_decay, args.dropout, args.precision)
    return task, TrainConfig.from_args(args)


def main(argv: list[str] | None = None) -> int:
    return train(*task_and_config(argv))


if __name__ == "__main__":
    sys.exit(main())
