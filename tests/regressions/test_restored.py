"""Which regressions a later change restored: worked out in the database over the alerts' columns."""

from typing import cast

import pytest

from dashboard.benchmarks.models import Commit, Series
from dashboard.regressions.models import Alert, AlertGroup, AlertKind, GroupKind, GroupState
from dashboard.regressions.selectors import regressions_restored
from tests.factories import CommitFactory, SeriesFactory, SuiteFactory

pytestmark = pytest.mark.django_db

THROUGHPUT = "output_throughput_tok_s"


@pytest.fixture
def commits() -> list[Commit]:
    return [cast(Commit, CommitFactory()) for _ in range(12)]


@pytest.fixture
def series() -> list[Series]:
    suite = SuiteFactory()
    return [
        cast(Series, SeriesFactory(suite=suite, hardware_class="b300", concurrency=level, metric=THROUGHPUT))
        for level in (1, 4, 16)
    ]


def group_with(
    *,
    base: Commit,
    head: Commit,
    changes: dict[Series, tuple[float, float]],
    kind: str | None = None,
    state: str = GroupState.CONFIRMED,
) -> AlertGroup:
    """A group over (base, head] with an alert per series: (before, after) values, throughput."""
    lost = any(after < before for before, after in changes.values())
    group = AlertGroup.objects.create(
        base_commit=base,
        head_commit=head,
        kind=kind or (GroupKind.REGRESSION if lost else GroupKind.IMPROVEMENT),
        state=state,
    )
    for one, (before, after) in changes.items():
        Alert.objects.create(
            group=group,
            series=one,
            kind=AlertKind.REGRESSION if after < before else AlertKind.IMPROVEMENT,
            before_value=before,
            after_value=after,
            change_pct=(after / before - 1) * 100,
        )
    return group


def test_a_later_change_that_brings_most_series_back_restores_the_regression(
    commits, series, django_assert_num_queries
) -> None:
    loss = group_with(base=commits[1], head=commits[2], changes={one: (100.0, 94.0) for one in series})
    # Two of three series back within half the 6 % loss (97.5 and 99.0 of 100), the third not (96.5).
    revert = group_with(
        base=commits[5],
        head=commits[6],
        changes={series[0]: (94.0, 97.5), series[1]: (94.0, 99.0), series[2]: (94.0, 96.5)},
    )

    with django_assert_num_queries(2):  # the restorations, then the groups that restored them
        restored = regressions_restored()

    assert list(restored) == [loss.pk]
    found = restored[loss.pk]
    assert (found.by.pk, found.series_restored, found.series_regressed) == (revert.pk, 2, 3)
    assert found.by.head_commit.sha == commits[6].sha  # loaded with the group


def test_one_series_of_three_back_restores_nothing_and_nothing_is_read_twice(
    commits, series, django_assert_num_queries
) -> None:
    group_with(base=commits[1], head=commits[2], changes={one: (100.0, 94.0) for one in series})
    group_with(base=commits[5], head=commits[6], changes={series[0]: (94.0, 100.0)})

    with django_assert_num_queries(1):
        assert regressions_restored() == {}


def test_a_change_before_the_regression_or_dismissed_or_the_same_way_does_not_restore_it(
    commits, series
) -> None:
    loss = group_with(base=commits[4], head=commits[5], changes={series[0]: (100.0, 94.0)})
    # Based before the regression's head: it came before the loss, so it cannot have undone it.
    group_with(base=commits[3], head=commits[6], changes={series[0]: (94.0, 100.0)})
    # Dismissed by its re-runs: not a change.
    group_with(
        base=commits[7], head=commits[8], changes={series[0]: (94.0, 100.0)}, state=GroupState.DISMISSED
    )
    # A further loss on the series does not undo the first one.
    group_with(base=commits[9], head=commits[10], changes={series[0]: (94.0, 90.0)})

    assert loss.pk not in regressions_restored()


def test_a_dismissed_regression_is_not_listed_and_a_trade_off_is(commits, series) -> None:
    dismissed = group_with(
        base=commits[1],
        head=commits[2],
        changes={series[0]: (100.0, 94.0)},
        state=GroupState.DISMISSED,
    )
    trade_off = group_with(
        base=commits[3],
        head=commits[4],
        changes={series[1]: (100.0, 90.0), series[2]: (100.0, 104.0)},
        kind=GroupKind.TRADE_OFF,
    )
    group_with(base=commits[6], head=commits[7], changes={series[0]: (94.0, 100.0), series[1]: (90.0, 99.0)})

    restored = regressions_restored()

    assert dismissed.pk not in restored
    # Its one regressed series came back: the improvement on another series does not count.
    assert (restored[trade_off.pk].series_restored, restored[trade_off.pk].series_regressed) == (1, 1)


def test_of_two_later_changes_the_one_that_restores_more_series_wins_then_the_nearer(commits, series) -> None:
    loss = group_with(base=commits[1], head=commits[2], changes={one: (100.0, 90.0) for one in series})
    group_with(base=commits[3], head=commits[4], changes={series[0]: (90.0, 100.0), series[1]: (90.0, 100.0)})
    everything = group_with(base=commits[8], head=commits[9], changes={one: (90.0, 100.0) for one in series})
    assert regressions_restored()[loss.pk].by.pk == everything.pk

    single = group_with(base=commits[5], head=commits[6], changes={series[0]: (100.0, 90.0)})
    later = group_with(base=commits[10], head=commits[11], changes={series[0]: (90.0, 100.0)})
    nearer = group_with(base=commits[6], head=commits[7], changes={series[0]: (90.0, 100.0)})
    restored = regressions_restored()
    assert restored[single.pk].by.pk == nearer.pk != later.pk
