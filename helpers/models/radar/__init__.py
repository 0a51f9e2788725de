"""The radar pipeline of Chapter 9 and Lab 3, as a model both use: the capture card (a process writing
frames into a shared ring at the real rate), the signal processing, the live consumer in four copy
designs, the numbers of a run, and the discrete-event model of the same pipeline (SIMULATED).

    designs    the four designs, the frame's units, the input checks and their errors
    card       the capture card's own process (`python -m helpers.models.radar.card`)
    ring       the card seen from the consumer: CardHost (its process), CaptureCard (one acquisition)
    dsp        the card's frames, the range-Doppler processing step, its float64 reference
    pipeline   the live consumer: PipelineConfig, run_pipeline (CuPy), run_cpu_consumer (no GPU)
    metrics    RunResult, latency summaries, the runs inside radar.* Evidence and their tables
    simulator  MachineParams, simulate, breaking_rate, machine_params (fitted to a recording)

Chapter 9's experiments, figures and verdicts are in helpers.ch09_radar_pipeline, which imports
this package; nothing here imports a chapter.
"""
