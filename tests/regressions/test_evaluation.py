import numpy as np

from lab.evaluation import (
    detections_match,
    detector_evaluate,
    labelled_series_generate,
)


def test_matching_is_one_to_one_within_two_commits():
    matched = detections_match(truths=(100, 104, 300), detections=[101, 102, 297])

    assert matched == {0: 0, 1: 1}


def test_generated_set_is_reproducible_and_mixes_steps_with_step_free_series():
    first = labelled_series_generate(count=60, seed=3)
    again = labelled_series_generate(count=60, seed=3)

    assert all(np.array_equal(a.values, b.values) for a, b in zip(first, again, strict=True))
    assert {labelled.kind for labelled in first} == {"steps", "iid", "ar1"}
    assert all(45 <= labelled.values.size <= 5000 for labelled in first)
    assert all(labelled.change_indices == () for labelled in first if labelled.kind != "steps")
    assert all(labelled.change_indices for labelled in first if labelled.kind == "steps")


def test_labels_point_at_the_first_value_after_each_step():
    for labelled in labelled_series_generate(count=80, seed=5):
        for index, fraction in zip(labelled.change_indices, labelled.step_fractions, strict=True):
            # Medians ignore outliers; with at most 10 % noise a step of 25 % or more always shows.
            if abs(fraction) >= 0.25:
                before = np.median(labelled.values[index - 8 : index])
                after = np.median(labelled.values[index : index + 8])
                assert np.sign(after - before) == np.sign(fraction)


def test_a_detector_that_knows_the_answers_scores_perfectly_and_a_silent_one_finds_nothing():
    series = labelled_series_generate(count=30, seed=1)
    answers = {labelled.values.tobytes(): list(labelled.change_indices) for labelled in series}

    oracle = detector_evaluate(series=series, detect=lambda values: answers.get(values.tobytes(), []))
    silent = detector_evaluate(series=series, detect=lambda values: [])

    assert (oracle.overall.precision, oracle.overall.recall, oracle.overall.f1) == (1.0, 1.0, 1.0)
    assert oracle.false_alarms_per_1000_iid == oracle.false_alarms_per_1000_ar1 == 0.0
    assert silent.overall.recall == 0.0
    assert silent.delay_found_fraction == 0.0


def test_the_detector_finds_steps_twice_the_noise_without_false_alarms():
    # A fixed sample as a guard against regressions of the detector; `evaluate_detector` measures more.
    report = detector_evaluate(series=labelled_series_generate(count=200, seed=1))

    assert report.large_steps.f1 >= 0.95
    assert report.false_alarms_per_1000_iid == 0.0
    # Short autocorrelated series still fool it now and then: at most one alarm per 10,000 such points.
    assert report.false_alarms_per_1000_ar1 < 0.1
    assert report.delay_found_fraction >= 0.95
    assert report.delay_median <= 4
