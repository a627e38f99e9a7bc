// Defined by the Warren Spark kernel when spark-shell starts: rich outputs for the notebook.
// Each helper prints one line "@@warren-display@@ {json}" that the kernel turns into an HTML
// table, an SVG chart or HTML (see render.py).
object Notebook {
  private val Marker = "@@warren-display@@ "

  private def str(s: String): String =
    "\"" + s.flatMap {
      case '"'          => "\\\""
      case '\\'         => "\\\\"
      case c if c < ' ' => f"\\u${c.toInt}%04x"
      case c            => c.toString
    } + "\""

  private def value(v: Any): String = v match {
    case d: Double if d.isNaN || d.isInfinite => str(d.toString)
    case d: Double                            => d.toString
    case f: Float                             => value(f.toDouble)
    case n: Int                               => n.toString
    case n: Long                              => n.toString
    case b: Boolean                           => b.toString
    case other                                => str(String.valueOf(other))
  }

  private def show(fields: (String, String)*): Unit =
    println(Marker + fields.map { case (k, v) => str(k) + ":" + v }.mkString("{", ",", "}"))

  /** An HTML table with these column names and rows. */
  def table(columns: Seq[String], rows: Seq[Seq[Any]]): Unit =
    show(
      "kind" -> str("table"),
      "columns" -> columns.map(str).mkString("[", ",", "]"),
      "rows" -> rows.map(_.map(value).mkString("[", ",", "]")).mkString("[", ",", "]")
    )

  /** A line chart of `points` (x, y), as SVG. */
  def lineChart(title: String, xLabel: String, yLabel: String, points: Seq[(Double, Double)]): Unit =
    show(
      "kind" -> str("line"),
      "title" -> str(title),
      "x_label" -> str(xLabel),
      "y_label" -> str(yLabel),
      "points" -> points.map { case (x, y) => s"[${value(x)},${value(y)}]" }.mkString("[", ",", "]")
    )

  /** HTML, shown as it is. */
  def html(content: String): Unit = show("kind" -> str("html"), "html" -> str(content))
}
