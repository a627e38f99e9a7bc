"""Warren in a plain spark-shell, as a user types it: the shell shows only warnings of Spark's
loggers, and Warren's tracker lines (workers arriving, rank 0's progress, the end of the job)
are echoed to its console for the job, so the user sees the job go on."""

from __future__ import annotations

import os
import subprocess

from sparkjob import CORE_JAR, RUNNER_JAR, SCALA_JAR, SPARK_JAR, built_jars, spark_home

SCRIPT = """\
import io.warren.spark._
val ranks = WarrenSpark.train(sc.parallelize(1 to 8, 2), 2)((comm, rows) => comm.rank)
println("RESULT " + ranks.mkString(","))
System.exit(0)
"""


def test_the_tracker_lines_show_in_a_spark_shell():
    built_jars()
    jars = ",".join(str(j) for j in (CORE_JAR, RUNNER_JAR, SCALA_JAR, SPARK_JAR))
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    # Fed on standard input, as typed: spark-shell is then interactive, with its WARN console.
    out = subprocess.run(
        [str(spark_home() / "bin" / "spark-shell"), "--master", "local-cluster[2,1,1024]", "--jars", jars,
         "--conf", "spark.ui.enabled=false"],
        input=SCRIPT, capture_output=True, text=True, env=env, timeout=300,
    )
    text = out.stdout + out.stderr
    assert "RESULT 0,1" in text, text[-4000:]
    assert 'Setting default log level to "WARN"' in text, text[:4000]
    assert "[warren] tracker: all 2 workers arrived" in text, text[-4000:]
    assert "[warren] tracker: all 2 workers finished in" in text, text[-4000:]
