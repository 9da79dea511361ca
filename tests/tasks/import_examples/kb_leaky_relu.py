# A KernelBench-style task (written for nkieval's tests): a PyTorch Model with get_inputs().
import torch
import torch.nn as nn


class Model(nn.Module):
    """Leaky ReLU with slope 0.01."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.leaky_relu(x, negative_slope=0.01)


batch_size = 16
dim = 1000


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
