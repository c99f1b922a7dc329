// The one set of number formats (core/util/format.h): hand-written expectations at the unit
// boundaries, rounding into the next unit, zero, negatives and non-finite values.
#include <QtTest>

#include <cmath>
#include <limits>

#include "util/format.h"

using namespace tp;

class TestFormat : public QObject {
    Q_OBJECT
private slots:
    void bytes_data()
    {
        QTest::addColumn<double>("value");
        QTest::addColumn<QString>("text");
        QTest::newRow("zero") << 0.0 << "0 B";
        QTest::newRow("negative zero") << -0.0 << "0 B";
        QTest::newRow("1023 B") << 1023.0 << "1023 B";
        QTest::newRow("1023.4 B rounds down") << 1023.4 << "1023 B";
        QTest::newRow("1023.6 B prints as 1 KiB") << 1023.6 << "1.00 KiB"; // %.0f would print 1024
        QTest::newRow("1 KiB") << 1024.0 << "1.00 KiB";
        QTest::newRow("1.5 KiB") << 1536.0 << "1.50 KiB";
        QTest::newRow("1023 KiB") << 1023.0 * 1024 << "1023.00 KiB";
        QTest::newRow("1 MiB - 1 B") << 1048575.0 << "1.00 MiB"; // 1023.999 KiB rounds to 1024.00
        QTest::newRow("384 MiB") << 384.0 * 1048576 << "384.00 MiB";
        QTest::newRow("1.5 GiB") << 1.5 * 1073741824 << "1.50 GiB";
        QTest::newRow("80 GiB") << 80.0 * 1073741824 << "80.00 GiB";
        QTest::newRow("2 TiB") << 2.0 * 1099511627776 << "2.00 TiB";
        QTest::newRow("above TiB stays TiB") << 5000.0 * 1099511627776 << "5000.00 TiB";
        QTest::newRow("negative bytes") << -512.0 << "-512 B";
        QTest::newRow("negative GiB") << -1.5 * 1073741824 << "-1.50 GiB";
        QTest::newRow("nan") << std::numeric_limits<double>::quiet_NaN() << "nan B";
        QTest::newRow("inf") << std::numeric_limits<double>::infinity() << "inf B";
    }
    void bytes()
    {
        QFETCH(double, value);
        QFETCH(QString, text);
        QCOMPARE(QString::fromStdString(formatBytes(value)), text);
    }

    void seconds_data()
    {
        QTest::addColumn<double>("value");
        QTest::addColumn<QString>("text");
        QTest::newRow("zero") << 0.0 << "0 s";
        QTest::newRow("quarter microsecond") << 2.5e-7 << "0.250 us";
        QTest::newRow("42 us") << 42e-6 << "42.000 us";
        QTest::newRow("999.9 us") << 999.9e-6 << "999.900 us";
        QTest::newRow("999.99996 us prints as 1 ms") << 999.99996e-6 << "1.000 ms"; // rounds to 1000.000 us
        QTest::newRow("1 ms") << 1e-3 << "1.000 ms";
        QTest::newRow("999.5 ms") << 0.9995 << "999.500 ms"; // three decimals: no rollover yet
        QTest::newRow("999.9996 ms prints as 1 s") << 0.9999996 << "1.000 s";
        QTest::newRow("1.5 s") << 1.5 << "1.500 s";
        QTest::newRow("118.26 s") << 118.26 << "118.260 s";
        QTest::newRow("negative ms") << -0.0123 << "-12.300 ms";
        QTest::newRow("negative zero") << -0.0 << "0 s";
        QTest::newRow("inf") << std::numeric_limits<double>::infinity() << "inf s";
        QTest::newRow("-inf") << -std::numeric_limits<double>::infinity() << "-inf s";
    }
    void seconds()
    {
        QFETCH(double, value);
        QFETCH(QString, text);
        QCOMPARE(QString::fromStdString(formatSeconds(value)), text);
    }

    void deltas()
    {
        QCOMPARE(QString::fromStdString(formatSecondsDelta(0.0015)), QString("+1.500 ms"));
        QCOMPARE(QString::fromStdString(formatSecondsDelta(-2.0)), QString("-2.000 s"));
        QCOMPARE(QString::fromStdString(formatSecondsDelta(0)), QString("0 s"));
        QCOMPARE(QString::fromStdString(formatBytesDelta(-40.0 * 1048576)), QString("-40.00 MiB"));
        QCOMPARE(QString::fromStdString(formatBytesDelta(2048)), QString("+2.00 KiB"));
        QCOMPARE(QString::fromStdString(formatBytesDelta(0)), QString("0 B"));
    }

    // With significant digits (plan_file.cpp's differences): same units, "%g" digits.
    void significantDigits()
    {
        QCOMPARE(QString::fromStdString(formatSeconds(1.23456789, 6)), QString("1.23457 s"));
        QCOMPARE(QString::fromStdString(formatSeconds(0.0123456789, 8)), QString("12.345679 ms"));
        QCOMPARE(QString::fromStdString(formatSeconds(0, 6)), QString("0 s"));
        QCOMPARE(QString::fromStdString(formatSeconds(4.2e-5, 6)), QString("42 us"));
        QCOMPARE(QString::fromStdString(formatBytes(80.0 * 1073741824 + 1073741.824, 8)), QString("80.001 GiB"));
        QCOMPARE(QString::fromStdString(formatBytes(1536, 6)), QString("1.5 KiB"));
        QCOMPARE(QString::fromStdString(formatBytes(512, 6)), QString("512 B"));
    }

    void counts_data()
    {
        QTest::addColumn<double>("value");
        QTest::addColumn<QString>("text");
        QTest::newRow("zero") << 0.0 << "0";
        QTest::newRow("999") << 999.0 << "999";
        QTest::newRow("1000") << 1000.0 << "1.00K";
        QTest::newRow("999999 prints as 1M") << 999999.0 << "1.00M"; // 999.999K rounds to 1000.00K
        QTest::newRow("gpt2 parameters") << 124439808.0 << "124.44M";
        QTest::newRow("1.5 billion") << 1.5e9 << "1.50B";
        QTest::newRow("175 billion") << 174.6e9 << "174.60B";
        QTest::newRow("negative") << -2500.0 << "-2.50K";
    }
    void counts()
    {
        QFETCH(double, value);
        QFETCH(QString, text);
        QCOMPARE(QString::fromStdString(formatCount(value)), text);
    }

    void flops_data()
    {
        QTest::addColumn<double>("value");
        QTest::addColumn<QString>("text");
        QTest::newRow("zero") << 0.0 << "0 FLOP";
        QTest::newRow("999") << 999.0 << "999 FLOP";
        QTest::newRow("1.5 GFLOP") << 1.5e9 << "1.50 GFLOP";
        QTest::newRow("2.5 TFLOP") << 2.5e12 << "2.50 TFLOP";
        QTest::newRow("1.5 PFLOP") << 1.5e15 << "1.50 PFLOP";
        QTest::newRow("above EFLOP stays EFLOP") << 3e21 << "3000.00 EFLOP";
    }
    void flops()
    {
        QFETCH(double, value);
        QFETCH(QString, text);
        QCOMPARE(QString::fromStdString(formatFlops(value)), text);
    }

    void bandwidth_data()
    {
        QTest::addColumn<double>("value");
        QTest::addColumn<QString>("text");
        QTest::newRow("NVLink") << 235e9 << "235 GB/s";
        QTest::newRow("fraction") << 12.5e9 << "12.5 GB/s";
        QTest::newRow("InfiniBand") << 25e9 << "25 GB/s";
        QTest::newRow("zero") << 0.0 << "0 GB/s";
    }
    void bandwidth()
    {
        QFETCH(double, value);
        QFETCH(QString, text);
        QCOMPARE(QString::fromStdString(formatBandwidth(value)), text);
    }
};

QTEST_GUILESS_MAIN(TestFormat)
#include "tst_format.moc"
