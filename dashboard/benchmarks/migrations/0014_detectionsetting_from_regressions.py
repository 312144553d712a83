"""DetectionSetting comes from the regressions app: the state only; the table
regressions_detectionsetting keeps its name, rows and constraints."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks", "0013_run_profiles"),
        ("regressions", "0008_detectionsetting_moved_to_benchmarks"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="DetectionSetting",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "metric_prefix",
                            models.CharField(
                                blank=True,
                                help_text="e.g. ttft_ms (every TTFT statistic) or ttft_ms_p99; empty: all",
                                max_length=50,
                            ),
                        ),
                        ("min_relative_change", models.FloatField(help_text="Fraction: 0.02 is 2 %")),
                        ("p_threshold", models.FloatField(default=0.0001)),
                        ("enabled", models.BooleanField(default=True)),
                        (
                            "suite",
                            models.ForeignKey(
                                blank=True,
                                help_text="Empty: every suite",
                                null=True,
                                on_delete=django.db.models.deletion.CASCADE,
                                to="benchmarks.suite",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "regressions_detectionsetting",
                        "constraints": [
                            models.UniqueConstraint(
                                condition=models.Q(("suite__isnull", False)),
                                fields=("suite", "metric_prefix"),
                                name="detection_setting_unique_suite",
                            ),
                            models.UniqueConstraint(
                                condition=models.Q(("suite__isnull", True)),
                                fields=("metric_prefix",),
                                name="detection_setting_unique_global",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    ("min_relative_change__gte", 0),
                                    ("p_threshold__gt", 0),
                                    ("p_threshold__lt", 1),
                                ),
                                name="detection_setting_sane_thresholds",
                            ),
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
