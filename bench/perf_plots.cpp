// Plots for docs/PERFORMANCE.md from a `tpplan bench` JSON document, drawn with Qt Charts and
// rendered offscreen (no display needed):
//   perf_plots RESULTS.json OUTDIR   ->  OUTDIR/perf_scaling.png, OUTDIR/perf_methods.png
// perf_scaling: fold time, the folded search (whole call and solver alone) and the flat solver
// against the number of layers (log-log), with a linear reference through the first point.
// perf_methods: search time of the folded search, the flat search and the ILP per model and
// mesh (log scale), ILP runs that hit the time limit marked in the category label.
#include <QApplication>
#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QTextStream>
#include <QValueAxis>

#include <algorithm>
#include <cmath>

namespace {

QFont labelFont(int points, bool bold = false)
{
    QFont f;
    f.setPointSize(points);
    f.setBold(bold);
    return f;
}

void styleAxis(QAbstractAxis* axis, const QString& title)
{
    axis->setTitleText(title);
    axis->setTitleFont(labelFont(12, true));
    axis->setLabelsFont(labelFont(11));
}

QLogValueAxis* logAxis(const QString& title, double lo, double hi)
{
    auto* axis = new QLogValueAxis;
    axis->setBase(10);
    axis->setLabelFormat("%g");
    // Whole decades around the data, so the grid lines fall on 1, 10, 100...
    // (nudged outwards so that the end decades get their labels too).
    axis->setRange(std::pow(10.0, std::floor(std::log10(lo))) * 0.999, std::pow(10.0, std::ceil(std::log10(hi))) * 1.001);
    axis->setMinorTickCount(8);
    styleAxis(axis, title);
    return axis;
}

bool render(QChart* chart, const QString& path, QSize size)
{
    chart->setTitleFont(labelFont(15, true));
    chart->legend()->setFont(labelFont(11));
    chart->legend()->setAlignment(Qt::AlignBottom);
    chart->setBackgroundBrush(Qt::white);
    QChartView view(chart);
    view.setRenderHint(QPainter::Antialiasing);
    view.resize(size);
    const bool ok = view.grab().save(path);
    QTextStream(stderr) << (ok ? "wrote " : "cannot write ") << path << "\n";
    return ok;
}

bool plotScaling(const QJsonObject& doc, const QString& path)
{
    const QJsonArray rows = doc["scaling"].toArray();
    auto* chart = new QChart;
    const QString model = doc["settings"].toObject()["scaling_model"].toString();
    const QString mesh = doc["settings"].toObject()["scaling_mesh"].toString();
    chart->setTitle(QStringLiteral("Fold and search CPU time vs depth (%1 layers, mesh %2)").arg(model, mesh));
    struct Curve {
        const char* key;
        QString name;
        QColor color;
    };
    // Median CPU ms each; "whole call" includes the per-op work (set-up, expansion, breakdown).
    const Curve curves[] = {{"fold", "fold", QColor(0x1f77b4)},
                            {"search", "folded, whole call", QColor(0xd62728)},
                            {"solver_cpu_ms", "folded solver", QColor(0x2ca02c)},
                            {"flat_solver_cpu_ms", "flat solver", QColor(0xff7f0e)}};
    double lo = 1e300, hi = 0, xlo = 1e300, xhi = 0;
    auto* axisX = new QLogValueAxis;
    QList<QAbstractSeries*> series;
    for (const auto& c : curves) {
        auto* line = new QLineSeries;
        line->setName(c.name);
        line->setPen(QPen(c.color, 3));
        auto* dots = new QScatterSeries;
        dots->setColor(c.color);
        dots->setMarkerSize(10);
        for (const auto& v : rows) {
            const QJsonObject r = v.toObject();
            if (!r.contains(c.key)) continue;
            // A sample ({wall_ms, cpu_ms}) or a plain CPU figure.
            const QJsonValue value = r[c.key];
            const double x = r["layers"].toDouble(),
                         y = value.isObject() ? value.toObject()["cpu_ms"].toDouble() : value.toDouble();
            if (!(y > 0)) continue;
            line->append(x, y);
            dots->append(x, y);
            lo = std::min(lo, y);
            hi = std::max(hi, y);
            xlo = std::min(xlo, x);
            xhi = std::max(xhi, x);
        }
        series << line << dots;
        chart->legend()->setMarkerShape(QLegend::MarkerShapeFromSeries);
    }
    // Linear growth from the search's first point, to show how far from sub-linear it is.
    if (!rows.isEmpty() && rows[0].toObject().contains("search")) {
        const QJsonObject first = rows[0].toObject();
        const double x0 = first["layers"].toDouble(), y0 = first["search"].toObject()["cpu_ms"].toDouble();
        auto* linear = new QLineSeries;
        linear->setName("linear in layers");
        linear->setPen(QPen(QColor(0x7f7f7f), 2, Qt::DashLine));
        linear->append(x0, y0);
        linear->append(xhi, y0 * xhi / x0);
        hi = std::max(hi, y0 * xhi / x0);
        series << linear;
    }
    if (hi <= 0) return false;
    for (auto* s : series) chart->addSeries(s);
    axisX->setBase(10);
    axisX->setLabelFormat("%g");
    axisX->setRange(xlo / 1.3, xhi * 1.3);
    axisX->setMinorTickCount(8);
    styleAxis(axisX, "transformer layers");
    auto* axisY = logAxis("time (ms, log scale)", lo, hi);
    chart->addAxis(axisX, Qt::AlignBottom);
    chart->addAxis(axisY, Qt::AlignLeft);
    for (auto* s : series) {
        s->attachAxis(axisX);
        s->attachAxis(axisY);
    }
    // Scatter markers duplicate the line entries in the legend.
    for (auto* s : series)
        if (qobject_cast<QScatterSeries*>(s))
            for (auto* marker : chart->legend()->markers(s)) marker->setVisible(false);
    return render(chart, path, {1100, 650});
}

bool plotMethods(const QJsonObject& doc, const QString& path)
{
    const QJsonArray rows = doc["comparison"].toArray();
    auto* chart = new QChart;
    chart->setTitle(QStringLiteral("Search time: folded vs flat vs ILP (CBC, limit %1 s)")
                        .arg(doc["settings"].toObject()["ilp_time_limit_s"].toDouble()));
    auto* folded = new QBarSet("folded search (ours)");
    auto* flat = new QBarSet("flat search (same engine, unfolded)");
    auto* ilp = new QBarSet("Alpa-style ILP (CBC, build + solve)");
    folded->setColor(QColor(0xd62728));
    flat->setColor(QColor(0xff7f0e));
    ilp->setColor(QColor(0x1f77b4));
    QStringList categories;
    double lo = 1e300, hi = 0;
    for (const auto& v : rows) {
        const QJsonObject r = v.toObject();
        auto ms = [&](const char* method) {
            const double t = r[method].toObject()["search"].toObject()["wall_ms"].toDouble();
            if (t > 0) {
                lo = std::min(lo, t);
                hi = std::max(hi, t);
            }
            return t;
        };
        *folded << ms("folded");
        *flat << ms("flat");
        *ilp << ms("ilp");
        QString label = r["model"].toString() + " " + r["mesh"].toString();
        if (r["ilp"].toObject()["status"].toString() != "optimal") label += " *";
        categories << label;
    }
    if (hi <= 0) return false;
    auto* bars = new QBarSeries;
    bars->append(folded);
    bars->append(flat);
    bars->append(ilp);
    chart->addSeries(bars);
    auto* axisX = new QBarCategoryAxis;
    axisX->append(categories);
    styleAxis(axisX, "model, mesh   (* the ILP stopped at its time limit without proving a plan optimal)");
    axisX->setLabelsFont(labelFont(10));
    axisX->setLabelsAngle(-40);
    axisX->setTruncateLabels(false);
    auto* axisY = logAxis("search time (ms, log scale)", lo, hi);
    chart->addAxis(axisX, Qt::AlignBottom);
    chart->addAxis(axisY, Qt::AlignLeft);
    bars->attachAxis(axisX);
    bars->attachAxis(axisY);
    return render(chart, path, {std::max(1100, 80 * static_cast<int>(categories.size()) + 200), 760});
}

} // namespace

int main(int argc, char** argv)
{
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    if (argc != 3) {
        QTextStream(stderr) << "usage: perf_plots RESULTS.json OUTDIR\n";
        return 2;
    }
    QFile file(QString::fromLocal8Bit(argv[1]));
    if (!file.open(QIODevice::ReadOnly)) {
        QTextStream(stderr) << argv[1] << ": cannot open\n";
        return 2;
    }
    QJsonParseError error;
    const QJsonDocument json = QJsonDocument::fromJson(file.readAll(), &error);
    if (json.isNull() || json.object()["format"].toString() != "tpstudio.bench") {
        QTextStream(stderr) << argv[1] << ": not a tpplan bench document (" << error.errorString() << ")\n";
        return 2;
    }
    const QString dir = QString::fromLocal8Bit(argv[2]);
    const bool ok = plotScaling(json.object(), dir + "/perf_scaling.png") & plotMethods(json.object(), dir + "/perf_methods.png");
    return ok ? 0 : 1;
}
