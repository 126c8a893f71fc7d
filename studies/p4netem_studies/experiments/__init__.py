"""The classic studies of experiments.md (E1-E5) as runnable, documented experiments.

An experiment is data: `experiments/NAME.yaml` in the repository says which pages, networks,
clients, initial windows and repetitions make up the study's matrix, and a `quick:` block says
what replaces them for a run of a few minutes. This package turns a definition into the
harness's own plans and runs it with the harness (p4netem_studies.harness: labs, endpoints, loaders,
captures, results), then analyses the results the way the study did and draws its main
comparison.

    definition.py   the YAML schema (pydantic): clients, modes, matrix blocks, channel and
                    object grids, sampling, the workload of E2, the quick variant
    pageload.py     a page-load experiment -> a harness Plan (+ what each condition means)
    sampling.py     random or stratified subsets of a large matrix (E4), seeded
    analysis/       one module per study (e1..e5): tables, CSVs and the comparison plot
    run.py          run one experiment (quick or full) and write everything into one directory

The workload generator E2 needs (many scripted web and bulk clients in the client namespaces of
the dumbbell) is a harness module: p4netem_studies.harness.workload.
"""

from .definition import (Experiment, ExperimentError, PageloadExperiment, WorkloadExperiment,
                         experiment_names, load_experiment)

__all__ = ["Experiment", "ExperimentError", "PageloadExperiment", "WorkloadExperiment",
           "experiment_names", "load_experiment"]
