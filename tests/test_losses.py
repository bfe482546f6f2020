"""The training objectives: the pairwise ranking term, Huber, clipping and row weights."""

import pytest
import torch

from lightning_metrics.models.losses import pairwise_loss, regression_loss

HUMAN = torch.tensor([0.9, 0.1, 0.5, 2.0, -1.0])
GROUPS = torch.tensor([0, 0, 0, 1, 1])  # rows 0-2 share a source, rows 3-4 another


def test_pairwise_loss_is_zero_exactly_when_every_pair_is_ordered_by_the_margin():
    margin = 0.25
    ordered = torch.tensor([1.0, 0.5, 0.75, 3.0, 2.75])  # gaps: 0.25, 0.25, 0.5 within group 0; 0.25 within group 1
    assert float(pairwise_loss(ordered, HUMAN, GROUPS, margin)) == 0.0
    short = ordered.clone()
    short[2] = 0.625  # rows 0 and 2 now 0.375 apart (fine), rows 2 and 1 only 0.125: one pair short by 0.125
    assert float(pairwise_loss(short, HUMAN, GROUPS, margin)) == pytest.approx(0.125 / 4)  # 4 ordered pairs in all
    reversed_ = -ordered
    assert float(pairwise_loss(reversed_, HUMAN, GROUPS, margin)) > 0
    # rows of different sources are never compared: group 1 may sit far below group 0
    far = torch.tensor([1.0, 0.5, 0.75, -10.0, -10.25])
    assert float(pairwise_loss(far, HUMAN, GROUPS, margin)) == 0.0


def test_pairwise_loss_ignores_ties_and_single_rows():
    assert float(pairwise_loss(torch.tensor([0.0, 5.0]), torch.tensor([1.0, 1.0]), torch.tensor([0, 0]))) == 0.0
    assert float(pairwise_loss(torch.tensor([0.0, 5.0]), torch.tensor([2.0, 1.0]), torch.tensor([0, 1]))) == 0.0
    assert float(
        pairwise_loss(torch.tensor([0.0, 5.0]), torch.tensor([2.0, 1.0]), torch.tensor([0, 0]), margin=1.0)
    ) == pytest.approx(6.0)


def test_regression_losses():
    pred, target = torch.tensor([[0.0], [0.0], [0.0]]), torch.tensor([[0.5], [3.0], [-8.0]])
    assert regression_loss(pred, target).tolist() == pytest.approx([(0.25 + 9 + 64) / 3])
    assert regression_loss(pred, target, "huber", delta=1.0).tolist() == pytest.approx([(0.125 + 2.5 + 7.5) / 3])
    assert regression_loss(pred, target, clip=2.0).tolist() == pytest.approx([(0.25 + 4 + 4) / 3])
    weighted = regression_loss(pred, target, weight=torch.tensor([2.0, 1.0, 0.0]))
    assert weighted.tolist() == pytest.approx([(2 * 0.25 + 9) / 3])
