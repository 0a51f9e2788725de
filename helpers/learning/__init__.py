"""Learning aids: the learner's committed predictions and their comparison with the result
(predictions), and the prediction record page (prediction_record).

Above presentation, below the chapters (pyproject.toml's import contract)."""
