"""Maven artifacts users depend on: the build publishes warren-core and warren-spark_2.13 with
their -sources and -javadoc jars (the examples are not published), and
`spark-submit --packages io.warren:warren-spark_2.13:VERSION` resolves them (and warren-core,
transitively) from a repository and runs the example on the standalone cluster.

The artifacts go to a temporary repository (`mvn deploy` to a file: URL, which attaches what
`mvn install` does, with ~/.m2 left alone), and Spark resolves through an ivy settings file
naming only that repository and Maven Central, with its own ivy cache: nothing comes from
~/.m2 or an earlier run. The POMs carry what Maven Central asks for, nothing is signed without
`-Prelease`, and that profile refuses to run before the repository's URL and a release version
are set."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from sparkjob import ROOT, VERSION, demo_job, submit

IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="chain"/>
  <resolvers>
    <chain name="chain" returnFirst="true">
      <ibiblio name="warren-test" m2compatible="true" root="{repo}"/>
      <ibiblio name="central" m2compatible="true"/>
    </chain>
  </resolvers>
</ivysettings>
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("maven-repo")
    subprocess.run(
        ["mvn", "-B", "-q", "-f", str(ROOT / "jvm" / "pom.xml"), "deploy", "-DskipTests",
         "-Dmaven.install.skip=true", f"-DaltDeploymentRepository=warren-test::{repo.as_uri()}",
         f"-Dwarren.native.dir={ROOT / 'target' / 'release'}"],
        check=True, timeout=900,
    )
    return repo


def published(repo: Path, artifact: str, classifier: str = "", ext: str = "jar") -> Path:
    """The one file of this artifact (a timestamped snapshot) in the repository."""
    base = VERSION.removesuffix("-SNAPSHOT")
    suffix = f"-{classifier}.{ext}" if classifier else f".{ext}"
    found = [p for p in (repo / "io" / "warren" / artifact / VERSION).glob(f"{artifact}-{base}-*{suffix}")
             if classifier or not p.name.endswith(("-sources.jar", "-javadoc.jar"))]
    assert len(found) == 1, f"expected one {artifact}{suffix}, found {found}"
    return found[0]


def names(jar: Path) -> set[str]:
    with zipfile.ZipFile(jar) as z:
        return set(z.namelist())


def test_libraries_are_published_with_sources_and_javadoc(repo):
    core = names(published(repo, "warren-core"))
    assert "io/warren/Communicator.class" in core
    assert any(n.startswith("io/warren/native/") and n.endswith(".so") for n in core), "no bundled native library"
    assert "io/warren/Communicator.java" in names(published(repo, "warren-core", "sources"))
    assert "io/warren/Communicator.html" in names(published(repo, "warren-core", "javadoc"))

    runner = names(published(repo, "warren-runner"))
    assert "io/warren/runner/WorkerRun.class" in runner
    assert "io/warren/runner/WorkerRun.java" in names(published(repo, "warren-runner", "sources"))

    scala = names(published(repo, "warren-scala_2.13"))
    assert "io/warren/scaladsl/package$RichCommunicator.class" in scala
    assert "io/warren/scaladsl/package.scala" in names(published(repo, "warren-scala_2.13", "sources"))

    spark = names(published(repo, "warren-spark_2.13"))
    assert "io/warren/spark/WarrenSpark$.class" in spark
    assert "io/warren/spark/WarrenSpark.scala" in names(published(repo, "warren-spark_2.13", "sources"))
    assert any("WarrenSpark" in n and n.endswith(".html") for n in names(published(repo, "warren-spark_2.13", "javadoc")))

    pom = published(repo, "warren-spark_2.13", ext="pom").read_text()
    assert "<artifactId>warren-core</artifactId>" in pom
    assert "<artifactId>warren-runner</artifactId>" in pom
    assert "<artifactId>warren-scala_2.13</artifactId>" in pom
    assert not (repo / "io" / "warren" / "warren-spark-examples_2.13").exists(), "the examples are not a library"


def test_the_published_poms_carry_what_maven_central_asks_and_nothing_is_signed_by_default(repo):
    parent = published(repo, "warren-parent", ext="pom").read_text()
    for element in ("<licenses>", "<name>Apache-2.0</name>", "<developers>", "<scm", "<url>",
                    "<description>"):
        assert element in parent, f"warren-parent's POM lacks {element}"
    assert "<id>release</id>" in parent and "maven-gpg-plugin" in parent
    core = published(repo, "warren-core", ext="pom").read_text()
    assert "<artifactId>warren-parent</artifactId>" in core and "<description>" in core
    assert not list(repo.rglob("*.asc")), "a build without -Prelease signed something"


def test_spark_submit_packages_resolves_warren_from_the_repository(repo, full_cluster, spark, tmp_path):
    settings = tmp_path / "ivysettings.xml"
    settings.write_text(IVY_SETTINGS.format(repo=repo.as_uri() + "/"))
    args, recorded = demo_job()
    job = submit(
        spark, full_cluster.url, args, tmp_path / "job", jars=[],
        conf={"spark.executor.cores": "1", "spark.executor.memory": "512m", "spark.cores.max": "3",
              "spark.jars.ivySettings": str(settings), "spark.jars.ivy": str(tmp_path / "ivy")},
        extra=["--packages", f"io.warren:warren-spark_2.13:{VERSION}"],
    )
    r = job.finish(timeout=400)
    log = job.stdout + job.stderr
    assert f"found io.warren#warren-spark_2.13;{VERSION} in warren-test" in log, log[:3000]
    assert f"found io.warren#warren-core;{VERSION} in warren-test" in log
    assert f"found io.warren#warren-runner;{VERSION} in warren-test" in log
    assert f"found io.warren#warren-scala_2.13;{VERSION} in warren-test" in log
    assert r.model_hash == recorded


def test_a_release_is_refused_until_the_repository_url_and_a_release_version_are_set():
    r = subprocess.run(["mvn", "-B", "-Dstyle.color=never", "-f", str(ROOT / "jvm" / "pom.xml"), "-Prelease",
                        "validate"], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0, r.stdout[-2000:]
    assert "set warren.repository.url in jvm/pom.xml" in r.stdout, r.stdout[-2000:]
    assert "a release to Maven Central needs a release version" in r.stdout
