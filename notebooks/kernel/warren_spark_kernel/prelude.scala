// Defined by the Warren Spark kernel when spark-shell starts: rich outputs for the notebook.
// Each helper prints one line "@@warren-display@@ {json}" that the kernel turns into an HTML
// table, an SVG chart or HTML (see render.py). The JSON is written by Jackson, which Spark ships.
object Notebook {
  private val Marker = "@@warren-display@@ "
  private val json = new com.fasterxml.jackson.databind.ObjectMapper()
    .registerModule(com.fasterxml.jackson.module.scala.DefaultScalaModule)

  private def show(fields: (String, Any)*): Unit = println(Marker + json.writeValueAsString(fields.toMap))

  /** An HTML table with these column names and rows (numbers or text). */
  def table(columns: Seq[String], rows: Seq[Seq[Any]]): Unit =
    show("kind" -> "table", "columns" -> columns, "rows" -> rows)

  /** A line chart of `points` (x, y), as SVG. */
  def lineChart(title: String, xLabel: String, yLabel: String, points: Seq[(Double, Double)]): Unit =
    show("kind" -> "line", "title" -> title, "x_label" -> xLabel, "y_label" -> yLabel,
      "points" -> points.map { case (x, y) => Seq(x, y) })

  /** HTML, shown as it is. */
  def html(content: String): Unit = show("kind" -> "html", "html" -> content)
}
