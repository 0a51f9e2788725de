"""Learning aids the chapters use: the exercise checks (`checks`). It knows no chapter and no lab."""
