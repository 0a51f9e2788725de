"""Learning aids the chapters use: the learner's committed predictions and their comparison with the
result (`predictions`), the prediction record page (`prediction_record`) and the exercise checks
(`checks`). It knows no chapter and no lab: above presentation, below the chapters (pyproject.toml's
import contract)."""
