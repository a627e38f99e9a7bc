package io.warren.examples

import java.nio.file.{Files, Path}

import scala.util.Using

/** The examples' temporary directories (checkpoints, RecordIO data), removed after a run. */
object TempDirs {

  /** Deletes `dir` and everything under it (what is already gone is skipped). */
  def deleteTree(dir: Path): Unit =
    Using.resource(Files.walk(dir)) { walk =>
      walk.sorted(java.util.Comparator.reverseOrder[Path]()).forEach(f => Files.deleteIfExists(f))
    }
}
