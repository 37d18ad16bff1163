"""A job's plan: checked once, and the plan a sweep's driver made ahead taken by the job of the same config."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from pipeline.config.build import plain
from pipeline.config.plan import JobPlan, forget_plans_ahead, plan_ahead
from tests.pipeline.config.test_config import REPO, composed


@pytest.fixture(autouse=True)
def no_plans_left():
    forget_plans_ahead()
    yield
    forget_plans_ahead()


def test_a_job_takes_the_plan_made_ahead_for_its_config_once():
    ahead = JobPlan.check(composed("retriever.k1=0.7"), REPO)
    plan_ahead(ahead, REPO)
    job_cfg = composed("retriever.k1=0.7")  # the same config, composed again for the job
    assert JobPlan.check(job_cfg, REPO) is ahead
    again = JobPlan.check(composed("retriever.k1=0.7"), REPO)  # taken once: the next one makes its own
    assert again is not ahead and again.retriever is not ahead.retriever


def test_the_plan_taken_holds_the_config_checking_the_jobs_own_would_give():
    ahead = JobPlan.check(composed("retriever.b=0.4"), REPO)
    plan_ahead(ahead, REPO)
    taken = JobPlan.check(composed("retriever.b=0.4"), REPO)
    forget_plans_ahead()
    own = JobPlan.check(composed("retriever.b=0.4"), REPO)
    assert own is not taken
    assert plain(taken.cfg) == plain(own.cfg) and taken.digest == own.digest
    assert OmegaConf.to_yaml(taken.cfg) == OmegaConf.to_yaml(own.cfg)


def test_another_config_or_folder_does_not_take_it(tmp_path):
    ahead = JobPlan.check(composed("retriever.k1=0.8"), REPO)
    plan_ahead(ahead, REPO)
    assert JobPlan.check(composed("retriever.k1=0.9"), REPO) is not ahead
    assert JobPlan.check(composed("retriever.k1=0.8"), tmp_path) is not ahead
    assert JobPlan.check(composed("retriever.k1=0.8"), REPO) is ahead
