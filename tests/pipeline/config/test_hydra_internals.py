"""A sweep composes each job's config once in the driver, though validation, Hydra's sweeper and its launcher
all ask for it: the later requests get independent copies equal to a fresh composition."""

from __future__ import annotations

import pickle

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf, open_dict

import pipeline.app
from pipeline.config.hydra_internals import ComposedConfigs, compose_normally, compose_once
from pipeline.sweep.callback import job_override_lists, validate_jobs

SWEEP = ["retriever.k1=0.9,1.2", "retriever.b=0.4,0.75"]


def test_validation_sweeper_and_launcher_share_one_composition_per_job():
    with initialize_config_dir(config_dir=str(pipeline.app.CONF_DIR), version_base="1.3"):
        master = compose("config", return_hydra_config=True)
        loader = GlobalHydra.instance().config_loader()
        jobs = job_override_lists(master, SWEEP)
        fresh = [loader.load_sweep_config(master, job) for job in jobs]  # before: Hydra's own composition
        memo = compose_once(loader)
        assert compose_once(loader) is memo
        validate_jobs(master, jobs)  # the driver's check
        for job in jobs:  # Hydra's validate_batch_is_legal
            loader.load_sweep_config(master, list(job))
        launched = []
        for number, job in enumerate(jobs):  # the basic launcher, which writes the job number in
            config = loader.load_sweep_config(master, list(job))
            with open_dict(config):
                config.hydra.job.num = number
            launched.append(config)
        assert len(jobs) == 4 and memo.composed == 4 and memo.reused == 8
        for number, (config, expected) in enumerate(zip(launched, fresh, strict=True)):
            with open_dict(expected):
                expected.hydra.job.num = number
            assert OmegaConf.to_container(config) == OmegaConf.to_container(expected)
        assert [c.retriever.k1 for c in launched] == [0.9, 0.9, 1.2, 1.2] and launched[0].hydra.job.num == 0
        assert isinstance(pickle.loads(pickle.dumps(loader)).load_sweep_config, ComposedConfigs)
        compose_normally(loader)
        assert not isinstance(loader.load_sweep_config, ComposedConfigs)
