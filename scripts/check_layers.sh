#!/usr/bin/env bash
# Fails when a core folder includes a folder above it in the data flow (docs/ARCHITECTURE.md):
# each folder may include only itself and the folders listed before it. Run by ctest (layering).
set -euo pipefail
cd "$(dirname "$0")/../core"
layers=(util layout graph mesh sharding models import fold cost search ilp plan explain verify export)
declare -A rank
for i in "${!layers[@]}"; do rank[${layers[$i]}]=$i; done
status=0
for dir in */; do
  dir=${dir%/}
  if [ -z "${rank[$dir]+x}" ]; then
    echo "check_layers: core/$dir is not in the layer list of scripts/check_layers.sh"
    status=1
    continue
  fi
  while IFS= read -r hit; do
    file=${hit%%:*}
    target=$(sed -E 's#.*"\.\./([a-z_]+)/.*#\1#' <<<"${hit#*:}")
    if [ -z "${rank[$target]+x}" ]; then
      echo "check_layers: $file includes unknown folder core/$target"
      status=1
    elif [ "${rank[$target]}" -ge "${rank[$dir]}" ]; then
      echo "check_layers: $file includes core/$target, which is above core/$dir"
      status=1
    fi
  done < <(grep -HoE '#include "\.\./[a-z_]+/' "$dir"/*.h "$dir"/*.cpp 2>/dev/null | sed 's/#include //' || true)
done
# tpstudio's three libraries (app/tpstudio/CMakeLists.txt): the session library is QtCore only
# and sees neither models nor widgets; the models library sees no widgets and no session.
cd ../app/tpstudio
check_app() { # folder, forbidden include pattern, what it means
  local hits
  hits=$(grep -HnE "$2" "$1"/*.h "$1"/*.cpp 2>/dev/null || true)
  if [ -n "$hits" ]; then
    echo "check_layers: app/tpstudio/$1 $3:"
    echo "$hits" | sed 's/^/  /'
    status=1
  fi
}
gui_headers='#include <(QtGui/|QtWidgets/|QtCharts/|QtSvg/)?(QWidget|QColor|QPainter|QImage|QPixmap|QFont|QIcon|QAction|QUndo|QGuiApplication|QApplication|QKeySequence|QBrush|QPen|QStandardItem|QAbstractItemView|QMainWindow|QDialog|QGraphics)'
check_app session "$gui_headers" "includes QtGui or QtWidgets (the session library is QtCore only)"
check_app session '#include "(models|widgets)/|#include "(mainwindow|graphview|inspector|blockoutlinemodel|candidatemodel|presentation)\.h"' "includes the models or widgets library"
check_app models '#include <(QtWidgets/)?(QWidget|QAction|QMainWindow|QDialog|QGraphics|QApplication)' "includes QtWidgets"
check_app models '#include "(document|plannerservice|recovery|mainwindow|graphview|inspector)\.h"' "includes the session or widgets library"
[ "$status" -eq 0 ] && echo "check_layers: ${#layers[@]} core folders and tpstudio's three libraries, no include points upward"
exit "$status"
