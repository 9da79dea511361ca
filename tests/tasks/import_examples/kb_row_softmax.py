# A KernelBench-style task (written for nkieval's tests): softmax over the last dimension.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(64, 300)]


def get_init_inputs():
    return []
