"""A run's load curve and accuracy scores: what capacity and the accuracy guard are derived from."""

from __future__ import annotations

from django.db import models

from dashboard.benchmarks.models import Run

# Series of a run as a whole (capacity, accuracy) rather than of one concurrency level.
WHOLE_RUN = 0


class LoadLevel(models.Model):
    """One level of a run's load curve as guidellm ran it, with every statistic it reported."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="load_levels")
    index = models.PositiveSmallIntegerField(help_text="Position in guidellm's report")
    label = models.CharField(max_length=60, help_text="e.g. constant 2.35 req/s, concurrency 4")
    strategy = models.CharField(max_length=20)
    streams = models.PositiveIntegerField(null=True, blank=True)
    rate = models.FloatField(null=True, blank=True, help_text="Requested requests per second")
    metrics = models.JSONField(default=dict, help_text="metric key -> value, as in measurements")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="load_level_unique_index")]
        ordering = ["run", "index"]

    def __str__(self) -> str:
        return f"run {self.run_id} level {self.index} ({self.label})"


class AccuracyScore(models.Model):
    """A run's score on an accuracy task, with its sample count and 95 % interval."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="accuracy_scores")
    name = models.CharField(max_length=40, help_text="The task, e.g. gsm8k; the metric is accuracy_<name>")
    correct = models.FloatField()
    samples = models.PositiveIntegerField()
    score_pct = models.FloatField()
    ci_low_pct = models.FloatField()
    ci_high_pct = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "name"], name="accuracy_unique_per_run")]

    def __str__(self) -> str:
        return f"run {self.run_id} {self.name}: {self.score_pct:.2f} % of {self.samples}"
