package io.warren.examples

import java.nio.charset.StandardCharsets
import java.nio.file.Path
import java.util.SplittableRandom

import scala.util.Using

import io.warren.RecordIOWriter
import io.warren.examples.RecordIOTraining.Params

/** The synthetic dataset of [[RecordIOTraining]]: records "id,label,f1,...,fn" whose labels
  * follow a hidden logistic model, written as RecordIO files.
  */
object RecordIOData {

  /** The features of record `id`, deterministic in the seed. */
  private[examples] def features(p: Params, id: Int): Array[Double] = {
    val r = new SplittableRandom(p.seed * 1000003L + id)
    Array.fill(p.features)(r.nextGaussian())
  }

  /** Record `id` as text: "id,label,f1,...,fn". */
  private[examples] def record(p: Params, id: Int): String = {
    val x = features(p, id)
    val wt = new SplittableRandom(p.seed).doubles(p.features.toLong + 1, -1.0, 1.0).toArray
    val z = x.indices.map(j => x(j) * wt(j)).sum + wt(p.features)
    val label = if (new SplittableRandom(p.seed ^ id).nextDouble() < 1.0 / (1.0 + math.exp(-3.0 * z))) 1 else 0
    (Seq(id.toString, label.toString) ++ x.map(v => java.lang.Double.toString(v))).mkString(",")
  }

  /** Writes the dataset as `p.files` RecordIO files in `dir` (record i in file i % files).
    *
    * @param p the parameters
    * @param dir an existing directory
    * @return the files' glob
    */
  def writeDataset(p: Params, dir: Path): String = {
    for (f <- 0 until p.files) {
      Using.resource(RecordIOWriter.create(dir.resolve(s"part-$f.rio"), RecordIOWriter.Compressor.NONE, p.chunkBytes)) {
        w => (f until p.records by p.files).foreach(i => w.write(record(p, i).getBytes(StandardCharsets.UTF_8)))
      }
    }
    dir.resolve("part-*.rio").toString
  }
}
