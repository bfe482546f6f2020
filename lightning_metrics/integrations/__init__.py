"""Where users already are: a ``torchmetrics.Metric`` that scores with any metric spec inside a training
loop (:mod:`.torchmetrics`)."""
